#include "pcdino/cluster/cost.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "pcdino/cluster/prices.hpp"

namespace pcdino::cluster {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

void use_source(std::vector<std::string>& sources, const char* id) {
  if (std::find(sources.begin(), sources.end(), id) == sources.end()) sources.emplace_back(id);
}

// A priced amount, or the thing whose price is missing: lines and run estimates build on these.
struct Priced {
  std::optional<double> usd_per_hour;
  std::string missing;  ///< "no price in the table for c5.4xlarge in us-west-2", "size unknown: ..."
};

Priced instances(const std::string& region, const std::string& type, int count,
                 std::vector<std::string>& sources) {
  const InstancePrice* p = instance_price(region, type);
  if (p == nullptr) return {std::nullopt, "no price in the table for " + type + " in " + region};
  use_source(sources, p->source);
  return {count * p->usd_per_hour, ""};
}

// gp3 volumes of `gib` each (ParallelCluster's default volume type, as validate.cpp reads it); `key` names
// the site spec key when the size is the AMI's, which the site spec does not know.
Priced gp3_volumes(const std::string& region, int gib, int count, const std::string& key,
                   std::vector<std::string>& sources) {
  if (gib <= 0) return {std::nullopt, "size unknown: " + key + " unset (the AMI's size)"};
  const ServicePrice* p = service_price(region, kPriceEbsGp3GbMonth);
  if (p == nullptr)
    return {std::nullopt, "no price in the table for " + std::string(kPriceEbsGp3GbMonth) + " in " + region};
  use_source(sources, p->source);
  return {count * gib * p->usd / kHoursPerMonth, ""};
}

void add(ClusterCost& c, const std::string& what, const std::string& detail, const Priced& p) {
  c.lines.push_back({what, detail, p.usd_per_hour, p.missing});
  if (p.usd_per_hour)
    c.usd_per_hour += *p.usd_per_hour;
  else
    c.missing.push_back(p.missing);
}

std::string usd(double v, const char* unit) {
  return fmt::format("{:.3f} USD/{}", v, unit);
}

}  // namespace

ClusterCost cluster_cost(const SiteSpec& s) {
  ClusterCost c;
  const std::string& region = s.region;
  add(c, "head node", "1 x " + s.head_node_type, instances(region, s.head_node_type, 1, c.sources));
  add(c, "head node root volume",
      s.head_root_volume_gib > 0 ? fmt::format("{} GiB gp3", s.head_root_volume_gib) : "",
      gp3_volumes(region, s.head_root_volume_gib, 1, "head_node.root_volume_gib", c.sources));
  for (size_t i = 0; i < s.queues.size(); ++i) {
    const QueueSpec& q = s.queues[i];
    if (q.capacity_type == "CAPACITY_BLOCK") {
      const CapacityBlockPrice* cb = capacity_block_price(region, q.instance_type);
      c.excluded.push_back(fmt::format(
          "queue {}: capacity block {} of {} x {}, paid up front for its days when bought ({}; `aws ec2 "
          "describe-capacity-block-offerings` quotes the fee)",
          q.name, q.capacity_reservation_id, q.min_count, q.instance_type,
          cb == nullptr ? "no capacity block rate in the table for " + q.instance_type + " in " + region
                        : fmt::format("AWS's rate was {:.3f} USD per instance-hour until {}, {:.2f} USD per "
                                      "day for {} instances",
                                      cb->usd_per_instance_hour, cb->valid_until,
                                      cb->usd_per_instance_hour * 24 * q.min_count, q.min_count)));
      if (cb != nullptr) use_source(c.sources, cb->source);
    } else if (q.min_count > 0) {
      add(c, "queue " + q.name + " static nodes", fmt::format("{} x {}", q.min_count, q.instance_type),
          q.capacity_type == "SPOT"
              ? Priced{std::nullopt, "no spot price in the table for " + q.instance_type}
              : instances(region, q.instance_type, q.min_count, c.sources));
    }
    if (q.capacity_type == "ONDEMAND" &&
        (!q.capacity_reservation_id.empty() || !q.capacity_reservation_resource_group_arn.empty()))
      c.excluded.push_back(fmt::format(
          "queue {}: on-demand capacity reservation {}: AWS bills its unused reserved instances at the "
          "on-demand rate while it is active (its size is not in the site spec)",
          q.name,
          q.capacity_reservation_id.empty() ? q.capacity_reservation_resource_group_arn
                                            : q.capacity_reservation_id));
    if (q.min_count > 0)
      add(c, "queue " + q.name + " root volumes",
          q.root_volume_gib > 0 ? fmt::format("{} x {} GiB gp3", q.min_count, q.root_volume_gib) : "",
          gp3_volumes(region, q.root_volume_gib, q.min_count, fmt::format("queues[{}].root_volume_gib", i),
                      c.sources));
  }
  if (s.fsx.enabled && !s.fsx.file_system_id.empty()) {
    c.excluded.push_back("FSx for Lustre " + s.fsx.file_system_id +
                         ": an existing file system, billed as such");
  } else if (s.fsx.enabled) {
    const bool scratch = s.fsx.deployment_type.rfind("SCRATCH", 0) == 0;
    const std::string kind =
        scratch ? s.fsx.deployment_type
                : fmt::format("{} at {} MB/s/TiB", s.fsx.deployment_type, s.fsx.throughput_per_tib);
    const FsxPrice* p = fsx_price(region, s.fsx.deployment_type, s.fsx.throughput_per_tib);
    if (p != nullptr) use_source(c.sources, p->source);
    add(c, "FSx for Lustre",
        fmt::format("{} GiB {}", s.fsx.capacity_gib, kind) +
            (p != nullptr ? fmt::format(" x {:.3f} USD/GB-month", p->usd_per_gb_month) : ""),
        p != nullptr ? Priced{s.fsx.capacity_gib * p->usd_per_gb_month / kHoursPerMonth, ""}
                     : Priced{std::nullopt, "no price in the table for FSx " + kind + " in " + region});
  }
  if (s.apps_ebs_gib > 0)
    add(c, "EBS /apps", fmt::format("{} GiB gp3", s.apps_ebs_gib),
        gp3_volumes(region, s.apps_ebs_gib, 1, "storage.apps_ebs_gib", c.sources));
  if (s.head_subnet_id.empty()) {
    // network.yaml: one NAT gateway with its Elastic IP, and the head node in the public subnet, which
    // gives it a public IPv4 address (MapPublicIpOnLaunch).
    const ServicePrice* nat = service_price(region, kPriceNatGatewayHour);
    if (nat != nullptr) use_source(c.sources, nat->source);
    add(c, "NAT gateway (network.yaml)", "1",
        nat != nullptr ? Priced{nat->usd, ""}
                       : Priced{std::nullopt, "no price in the table for NAT gateway in " + region});
    const ServicePrice* ip = service_price(region, kPricePublicIpv4Hour);
    if (ip != nullptr) use_source(c.sources, ip->source);
    add(c, "public IPv4 addresses", "2 (NAT gateway, head node)",
        ip != nullptr ? Priced{2 * ip->usd, ""}
                      : Priced{std::nullopt, "no price in the table for public IPv4 in " + region});
    c.excluded.push_back(
        "NAT gateway data, per GB processed (the S3 gateway endpoint keeps S3 traffic off it)");
  } else {
    c.excluded.push_back("the existing network's NAT gateway and addresses (network.head_subnet_id)");
  }
  if (s.logs || s.dashboards)
    c.excluded.push_back(
        "CloudWatch: logs per GB ingested (ParallelCluster's, the VPC flow log) and the cluster's dashboard");
  return c;
}

RunCost run_cost(const SiteSpec& s, const ClusterCost& always_on, const PipelineConfig& p,
                 const RunFigures& f) {
  RunCost r;
  const QueueSpec* q = s.queues.empty() ? nullptr : &s.queues.front();
  if (!p.slurm.partition.empty()) {
    const auto it = std::find_if(s.queues.begin(), s.queues.end(),
                                 [&](const QueueSpec& x) { return x.name == p.slurm.partition; });
    q = it == s.queues.end() ? nullptr : &*it;
    if (q == nullptr) {
      std::vector<std::string> names;
      for (const auto& x : s.queues) names.push_back(x.name);
      r.problem = "slurm.partition '" + p.slurm.partition + "' is no queue of " + s.name +
                  " (queues: " + join(names, ", ") + ")";
      return r;
    }
  }
  if (q == nullptr) {
    r.problem = s.name + " has no queue";
    return r;
  }
  r.queue = q->name;
  r.instance_type = q->instance_type;
  r.nodes = p.train.nnodes;
  r.gpus = p.train.nnodes * std::max(1, p.train.num_gpus);
  r.hours = static_cast<double>(p.train.epochs) * static_cast<double>(f.train_images) /
            (f.images_per_second_per_gpu * r.gpus) / 3600.0;
  if (r.nodes > q->max_count) {
    r.problem = fmt::format("the run needs {} nodes; queue {} has at most {} (max_count)", r.nodes, q->name,
                            q->max_count);
    return r;
  }
  r.capacity_block = q->capacity_type == "CAPACITY_BLOCK";
  r.extra_nodes = std::max(0, r.nodes - q->min_count);
  if (r.extra_nodes > 0) {
    const size_t i = static_cast<size_t>(q - s.queues.data());
    const Priced parts[] = {q->capacity_type == "SPOT"
                                ? Priced{std::nullopt, "no spot price in the table for " + q->instance_type}
                                : instances(s.region, q->instance_type, r.extra_nodes, r.sources),
                            gp3_volumes(s.region, q->root_volume_gib, r.extra_nodes,
                                        fmt::format("queues[{}].root_volume_gib", i), r.sources)};
    std::vector<std::string> missing;
    for (const Priced& part : parts) {
      if (part.usd_per_hour)
        r.extra_usd_per_hour += *part.usd_per_hour;
      else
        missing.push_back(part.missing);
    }
    r.extra_missing = join(missing, "; ");
  }
  r.usd = r.hours * (always_on.usd_per_hour + r.extra_usd_per_hour);
  return r;
}

std::string cost_report(const SiteSpec& site, const PipelineConfig* pipeline, const RunFigures& figures) {
  const ClusterCost c = cluster_cost(site);
  std::string out =
      fmt::format("Cost of cluster {} in {} (on-demand Linux; sources below)\n", site.name, site.region);
  for (const auto& l : c.lines) {
    out += fmt::format("  {:<34} {:<40} ", l.what, l.detail);
    out += l.usd_per_hour ? fmt::format("{:>9.3f} USD/h\n", *l.usd_per_hour) : l.missing + "\n";
  }
  out += fmt::format("  {:<34} {:<40} {:>9.3f} USD/h\n", "always-on total", "", c.usd_per_hour);
  if (!c.missing.empty())
    out += fmt::format("    the total lacks the {} unpriced line(s) above\n", c.missing.size());
  for (const auto& e : c.excluded) out += "    not in the total: " + e + "\n";
  std::vector<std::string> sources = c.sources;
  if (pipeline != nullptr) {
    const RunCost r = run_cost(site, c, *pipeline, figures);
    if (!r.problem.empty()) {
      out += "Training run: no estimate: " + r.problem + "\n";
    } else {
      out += fmt::format(
          "Training run on queue {}: {} epochs x {} images at {:.1f} images/s per GPU on {} GPU(s) "
          "({} x {}) = {:.2f} h\n",
          r.queue, pipeline->train.epochs, figures.train_images, figures.images_per_second_per_gpu, r.gpus,
          r.nodes, r.instance_type, r.hours);
      if (r.capacity_block)
        out += "  its nodes are the queue's capacity block, prepaid (not in the total)\n";
      else if (r.extra_nodes == 0)
        out += "  its nodes are the queue's static ones, already in the always-on total\n";
      else
        out += fmt::format("  {} node(s) beyond the queue's static ones, with root volumes: {}{}\n",
                           r.extra_nodes, usd(r.extra_usd_per_hour, "h"),
                           r.extra_missing.empty() ? "" : " (not priced: " + r.extra_missing + ")");
      std::vector<std::string> without;
      if (!c.missing.empty())
        without.push_back(fmt::format("the {} unpriced line(s) above", c.missing.size()));
      if (!r.extra_missing.empty()) without.push_back(r.extra_missing);
      out += fmt::format("  {:.2f} h x ({} always-on + {} extra) = {:.2f} USD{}\n", r.hours,
                         usd(c.usd_per_hour, "h"), usd(r.extra_usd_per_hour, "h"), r.usd,
                         without.empty() ? "" : " (without " + join(without, "; ") + ")");
      for (const auto& id : r.sources) use_source(sources, id.c_str());
    }
  }
  out += "Sources:\n";
  for (const auto& id : sources) out += "  " + id + ": " + price_source_text(id) + "\n";
  return out;
}

}  // namespace pcdino::cluster
