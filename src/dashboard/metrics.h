#pragma once
// /metrics: a Snapshot in Prometheus's text exposition format (version 0.0.4), under Ray's
// metric names where Ray has one, so a Grafana board made for Ray's reads Prism's:
//
//   ray_tasks{Name,State}                 tasks now in each state, by function (gauge)
//   ray_actors{Name,State}                actors by class and state (gauge)
//   ray_placement_groups{State}           live placement groups (gauge)
//   ray_object_store_memory{Location}     bytes in memory (MMAP_SHM) and on disk (SPILLED)
//   ray_object_store_num_local_objects    objects in memory or spilled
//   ray_node_cpu_utilization              the host's CPU use, percent
//   ray_node_cpu_count                    the host's cores
//   ray_node_mem_used, ray_node_mem_total the host's memory, bytes
//
// and Prism's own, prefixed prism_: prism_rank_cpu_percent, prism_rank_rss_bytes,
// prism_rank_running_tasks, prism_rank_alive, prism_object_store_capacity_bytes,
// prism_spilled_bytes_total, prism_kv_keys, prism_actor_pending_calls{actor_id,Name,
// actor_name}. Per-rank series carry the labels rank and host (Ray's NodeAddress is a
// rank's host here; several ranks may share one).
//
// Then the libraries' own, from their panels (platform::PanelMetric): Serve's under Ray's
// names (ray_serve_num_http_requests{route,method,application,status_code},
// ray_serve_http_request_latency_ms, ray_serve_num_ongoing_http_requests,
// ray_serve_deployment_request_counter{deployment,replica,application},
// ray_serve_deployment_error_counter, ray_serve_deployment_processing_latency_ms,
// ray_serve_deployment_replica_healthy), Tune's (prism_tune_trials{experiment,state}, ...)
// and Train's (prism_train_reports, prism_train_checkpoints, ...). A counter is written
// with _total (ray_serve_num_http_requests_total), as Ray 2.10+ writes them.

#include <string>

#include "dashboard/snapshot.h"

namespace prism::dashboard {

/// The text of GET /metrics (Content-Type: text/plain; version=0.0.4).
std::string PrometheusText(const Snapshot& s);

/// A label value escaped for the text format (backslash, double quote and newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace prism::dashboard
