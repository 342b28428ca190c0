// What every user of HDF5 in the process shares: Debian's serial HDF5 is not built thread-safe, and HDF5's
// file locks are refused by Lustre and NFS mounted without flock.
#pragma once

#include <H5Cpp.h>

#include <mutex>
#include <string>
#include <vector>

namespace pcdino {

/// The process-wide HDF5 lock: hold it for every HDF5 call, including the destruction of HDF5 objects.
/// The first call also turns off HDF5's own error-stack printing (our exceptions carry the message).
std::mutex& hdf5_mutex();

/// File-access properties without HDF5's file locking (for reading from shared filesystems).
H5::FileAccPropList no_file_locking();

/// Attaches a scalar variable-length string attribute `name` = `value` to `object` (hold hdf5_mutex()).
/// Throws H5::Exception.
void write_string_attribute(H5::H5Object& object, const std::string& name, const std::string& value);

/// Writes `values` as a 1-D dataset `name` [N] of variable-length strings in `file` (hold hdf5_mutex()).
/// Throws H5::Exception.
void write_string_dataset(H5::H5File& file, const std::string& name, const std::vector<std::string>& values);

/// Reads the 1-D variable-length string dataset `name` of `file` (hold hdf5_mutex()); HDF5's buffers are
/// released before it returns. Throws H5::Exception, also when the dataset is not 1-D.
std::vector<std::string> read_string_dataset(H5::H5File& file, const std::string& name);

}  // namespace pcdino
