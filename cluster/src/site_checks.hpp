// The site spec's rules that check keys against each other once both are read (rows of site.cpp's tables,
// site_rows::rule): each throws ConfigError at the key it names, with the file, line and column.
#pragma once

#include "site_table.hpp"

namespace pcdino::cluster::site_rows {

/// Every section that uploads head-node.sh (spank, monitoring.prometheus, node_check, containers) gets one
/// s3_prefix: its own, or the first given; one that differs, or none given at all, is refused.
void check_upload_prefix(Scope& scope, SiteSpec& s);

/// node_check against the image (image.custom_ami) and slurm.settings (no key the node check sets, and
/// SchedulerParameters keeping nohold_on_prolog_fail).
void check_node_check(Scope& scope, SiteSpec& s);

/// containers against the release: Pyxis's example configuration from 3.11.1.
void check_containers(Scope& scope, SiteSpec& s);

/// monitoring.prometheus against the OS's packages, the image and slurm.settings' MetricsType.
void check_prometheus(Scope& scope, SiteSpec& s);

/// slurm.settings against the release's Slurm: a line asking for a feature of a later Slurm
/// (core/slurm_features.hpp's keys: HealthCheckTimeout, MetricsAuthUsers, ...) is refused naming the line,
/// the Slurm it needs and the release's.
void check_slurm_release(Scope& scope, SiteSpec& s);

}  // namespace pcdino::cluster::site_rows
