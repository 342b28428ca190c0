#include "pcdino/spank/environment.hpp"

#include <cctype>
#include <stdexcept>

namespace pcdino::spank {

std::string first_host(const std::string& nodelist) {
  // The first element at bracket depth 0 ends at a ',' outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw std::invalid_argument("malformed host list '" + nodelist + "'");
    if (c == ',' && depth == 0) break;
    first.push_back(c);
  }
  if (depth != 0 || first.empty()) throw std::invalid_argument("malformed host list '" + nodelist + "'");
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  // prefix[range,...]suffix: the first number of the first range, zero padding kept.
  const auto close = first.find(']', open);
  std::string inside = first.substr(open + 1, close - open - 1);
  std::string number;
  for (char c : inside) {
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    number.push_back(c);
  }
  if (number.empty()) throw std::invalid_argument("malformed host range in '" + nodelist + "'");
  return first.substr(0, open) + number + first.substr(close + 1);
}

int master_port(std::uint32_t job_id, std::uint32_t step_id, const PortRange& range) {
  const auto span = static_cast<std::uint64_t>(range.high - range.low + 1);
  return range.low + static_cast<int>((job_id + 7919ULL * step_id) % span);
}

std::vector<std::string> device_list(const std::string& visible) {
  std::vector<std::string> devices;
  std::string item;
  for (char c : visible + ",") {
    if (c != ',') {
      item.push_back(c);
      continue;
    }
    const auto dash = item.find('-');
    int first = 0, last = -1;
    // "a-b" of two numbers (a vendor runtime's range) is each number in it; anything else (a UUID
    // such as "GPU-8f0e...") is one device.
    if (dash != std::string::npos && dash > 0 && dash <= 6 && dash + 1 < item.size() &&
        item.size() - dash <= 7 && item.find_first_not_of("0123456789-") == std::string::npos &&
        item.find('-', dash + 1) == std::string::npos) {
      first = std::stoi(item.substr(0, dash));
      last = std::stoi(item.substr(dash + 1));
    }
    if (last >= first && last - first < 4096) {
      for (int d = first; d <= last; ++d) devices.push_back(std::to_string(d));
    } else if (!item.empty()) {
      devices.push_back(item);
    }
    item.clear();
  }
  return devices;
}

std::vector<std::pair<std::string, std::string>> task_environment(
    const TaskInfo& task, const Profile* profile, const std::map<std::string, Version>& versions,
    bool bind_per_task, const PortRange& ports) {
  std::vector<std::pair<std::string, std::string>> env;
  if (task.batch_step) {
    if (profile != nullptr) {
      for (const auto& entry : profile->env) {
        if (entry.applies(versions)) env.emplace_back(entry.name, entry.value);
      }
    }
    return env;
  }
  env = {
      {"RANK", std::to_string(task.global_rank)},
      {"LOCAL_RANK", std::to_string(task.local_rank)},
      {"WORLD_SIZE", std::to_string(task.world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(task.local_world_size)},
  };
  if (!task.step_nodelist.empty()) {
    try {
      env.emplace_back("MASTER_ADDR", first_host(task.step_nodelist));
    } catch (const std::invalid_argument&) {
      // An unparsable host list costs MASTER_ADDR only, not the other variables.
    }
  }
  const int port = master_port(task.job_id, task.step_id, ports);
  env.emplace_back("MASTER_PORT", std::to_string(port));
  if (!task.omp_num_threads_set) {
    if (task.cpus_per_task > 0) {
      env.emplace_back("OMP_NUM_THREADS", std::to_string(task.cpus_per_task));
    } else if (task.local_world_size > 1) {
      env.emplace_back("OMP_NUM_THREADS", "1");
    }
  }
  if (profile == nullptr) return env;
  for (const auto& entry : profile->env) {
    if (entry.applies(versions)) env.emplace_back(entry.name, entry.value);
  }
  // Collectives other than NCCL find rank 0 by IP:port (AcceleratorKind::root_comm_variable); the port after
  // MASTER_PORT (in the range), so that a PyTorch store on MASTER_PORT and the library's bootstrap never
  // share one. Half the range away from MASTER_PORT: neither this step's MASTER_PORT nor a neighbouring job's
  // (master_port() gives job J+1 the port after job J's).
  const std::string root_comm = root_comm_variable(profile->devices);
  const int span = ports.high - ports.low + 1;
  if (!root_comm.empty() && !task.master_ip.empty() && span >= 2) {
    const int other = ports.low + (port - ports.low + span / 2) % span;
    env.emplace_back(root_comm, task.master_ip + ":" + std::to_string(other));
  }
  if (bind_per_task && profile->devices != nullptr && !task.visible_devices.empty()) {
    std::vector<std::string> devices = device_list(task.visible_devices);
    if (!devices.empty())
      env.emplace_back(device_variable(profile->devices), devices[task.local_rank % devices.size()]);
  }
  return env;
}

}  // namespace pcdino::spank
