#include "pcdino/core/hdf5.hpp"

#include <mutex>

namespace pcdino {

// Debian's serial HDF5 is not built thread-safe: every HDF5 call in the process goes through this lock.
std::mutex& hdf5_mutex() {
  static std::mutex m;
  // Our exceptions carry the message; HDF5's own error-stack dump on stderr would only add noise.
  static const bool quiet = [] {
    H5::Exception::dontPrint();
    return true;
  }();
  (void)quiet;
  return m;
}

// Read-only access without HDF5's file locks, which Lustre and NFS mounted without flock refuse.
H5::FileAccPropList no_file_locking() {
  H5::FileAccPropList fapl;
  H5Pset_file_locking(fapl.getId(), false, true);
  return fapl;
}

void write_string_attribute(H5::H5Object& object, const std::string& name, const std::string& value) {
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  const char* p = value.c_str();
  object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, &p);
}

void write_string_dataset(H5::H5File& file, const std::string& name, const std::vector<std::string>& values) {
  std::vector<const char*> p;
  for (const auto& v : values) p.push_back(v.c_str());
  const hsize_t n = values.size();
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  file.createDataSet(name, type, H5::DataSpace(1, &n)).write(p.data(), type);
}

std::vector<std::string> read_string_dataset(H5::H5File& file, const std::string& name) {
  H5::DataSet ds = file.openDataSet(name);
  // The extent is read into one hsize_t: a dataset of another rank would write past it.
  if (ds.getSpace().getSimpleExtentNdims() != 1)
    throw H5::DataSetIException("read_string_dataset", "/" + name + " is not 1-dimensional");
  hsize_t n = 0;
  ds.getSpace().getSimpleExtentDims(&n);
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  std::vector<char*> p(n, nullptr);
  if (n > 0) ds.read(p.data(), type);
  std::vector<std::string> out;
  for (char* s : p) out.emplace_back(s != nullptr ? s : "");
  if (n > 0) H5Dvlen_reclaim(type.getId(), ds.getSpace().getId(), H5P_DEFAULT, p.data());
  return out;
}

}  // namespace pcdino
