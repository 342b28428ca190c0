#include "pcdino/cluster/cost.hpp"

#include <fmt/format.h>

#include "pcdino/cluster/catalogue.hpp"

namespace pcdino::cluster {

std::string cost_report(const SiteSpec& site, const PipelineConfig* pipeline, const RunFigures& figures) {
  std::string out =
      fmt::format("Cost of cluster {} (on-demand, {}; {})\n", site.name, kPriceRegion, kPriceSource);
  double hourly = 0;
  std::string unknown;
  const auto line = [&](const std::string& what, const std::string& type, int count) {
    const InstanceType* it = find_instance(type);
    if (it == nullptr || it->price_per_hour == 0) {
      out += fmt::format("  {:<34} {:>3} x {:<15} no price in the table\n", what, count, type);
      unknown += (unknown.empty() ? "" : ", ") + type;
      return 0.0;
    }
    const double cost = count * it->price_per_hour;
    out += fmt::format("  {:<34} {:>3} x {:<15} {:>10.3f} USD/h\n", what, count, type, cost);
    return cost;
  };
  hourly += line("head node", site.head_node_type, 1);
  for (const auto& q : site.queues) {
    if (q.min_count > 0) hourly += line("queue " + q.name + " static nodes", q.instance_type, q.min_count);
  }
  if (site.fsx.enabled && site.fsx.file_system_id.empty()) {
    const double gb_month = fsx_price_per_gb_month(site.fsx.deployment_type, site.fsx.throughput_per_tib);
    if (gb_month > 0) {
      const double fsx = site.fsx.capacity_gib * gb_month / 730.0;  // 730 hours per month
      out += fmt::format("  {:<34} {:>5} GiB {:<11} {:>10.3f} USD/h ({:.3f} USD/GB-month)\n",
                         "FSx for Lustre", site.fsx.capacity_gib, site.fsx.deployment_type, fsx, gb_month);
      hourly += fsx;
    } else {
      out += fmt::format("  {:<34} no price in the table for {} at {} MB/s/TiB\n", "FSx for Lustre",
                         site.fsx.deployment_type, site.fsx.throughput_per_tib);
      unknown += (unknown.empty() ? "" : ", ") + std::string("FSx ") + site.fsx.deployment_type;
    }
  }
  out += fmt::format("  {:<34} {:>31.3f} USD/h{}\n", "always-on total", hourly,
                     unknown.empty() ? "" : " (without " + unknown + ")");
  if (pipeline != nullptr && figures.train_images > 0 && figures.images_per_second_per_gpu > 0 &&
      !site.queues.empty()) {
    const auto& q = site.queues.front();
    const int gpus = pipeline->train.nnodes * std::max(1, pipeline->train.num_gpus);
    const double hours = static_cast<double>(pipeline->train.epochs) *
                         static_cast<double>(figures.train_images) /
                         (figures.images_per_second_per_gpu * gpus) / 3600.0;
    const InstanceType* it = find_instance(q.instance_type);
    out += fmt::format(
        "Training run: {} epochs x {} images at {:.1f} images/s per GPU on {} GPU(s) = {:.2f} h\n",
        pipeline->train.epochs, figures.train_images, figures.images_per_second_per_gpu, gpus, hours);
    if (it != nullptr && it->price_per_hour > 0) {
      const double nodes = hours * pipeline->train.nnodes * it->price_per_hour;
      out += fmt::format("  {} x {} for {:.2f} h: {:.2f} USD, plus the always-on total: {:.2f} USD\n",
                         pipeline->train.nnodes, q.instance_type, hours, nodes, nodes + hours * hourly);
    } else {
      out += fmt::format("  no price in the table for {}\n", q.instance_type);
    }
  }
  return out;
}

}  // namespace pcdino::cluster
