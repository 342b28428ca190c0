// libFuzzer target of the node check's parsers, which run as root in every job's prolog on what vendor tools
// and the kernel print: /dev/kmsg and dmesg records (Xid), `nvidia-smi --query-gpu` CSV and its stderr,
// `nvidia-smi nvlink --status`, `dcgmi diag`, `neuron-ls --json-output`, nccom-test's output, `hl-smi` CSV
// and `scontrol show node -o`. Each may refuse its input only with a pcdino::Error; another exception, a
// crash or a sanitizer report is a bug. Run by scripts/fuzz probes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pcdino/core/error.hpp"
#include "pcdino/doctor/gpu_health.hpp"
#include "pcdino/doctor/habana.hpp"
#include "pcdino/doctor/neuron.hpp"
#include "pcdino/doctor/probes.hpp"

using namespace pcdino::doctor;

namespace {

template <class F>
void refusing_only_with_errors(F&& parse) {
  try {
    parse();
  } catch (const pcdino::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  refusing_only_with_errors([&] { judge_xids(parse_xids(text)); });
  refusing_only_with_errors([&] { judge_gpus(parse_gpu_query(text, true), unreachable_gpus(text), 0, 8); });
  refusing_only_with_errors([&] { parse_gpu_query(text, false); });
  refusing_only_with_errors([&] { judge_nvlink(parse_nvlink_status(text), text); });
  refusing_only_with_errors([&] { judge_dcgm(0, text), judge_dcgm(1, text); });
  refusing_only_with_errors([&] { parse_hl_smi(text); });
  refusing_only_with_errors([&] { parse_neuron_ls(text); });
  refusing_only_with_errors([&] { parse_nccom_busbw(text); });
  refusing_only_with_errors([&] { drained(parse_scontrol_node(text)); });
  return 0;
}
