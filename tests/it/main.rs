#![allow(missing_docs)]
//! One integration binary (one link on a two-core machine), a module per area.

mod atlasmart;
mod audit_limits;
mod backfill;
mod batches;
mod chaos;
mod published_immutable;
// Its pipeline has a `url` notify target too.
#[cfg(feature = "console")]
mod console;
#[cfg(feature = "console")]
mod console_limits;
mod containment;
mod crash;
mod cron_dst;
mod data_layout;
#[cfg(feature = "http")]
mod declared_commands;
mod disk_full;
mod engine_races;
mod environment_reads;
mod escaping;
mod exit_codes;
mod fencing;
mod fingerprints_and_panics;
mod function_sizes;
mod gate_secrets;
mod global_pools;
mod impact;
mod kill9;
mod launch_env;
mod layers;
mod lineage;
mod manifest_errors;
mod minutely;
mod no_prints;
mod notify;
mod operator;
mod operator_paths;
mod operator_repair;
mod parquet;
mod partitions;
mod pass_reads;
mod plan;
mod pools;
mod publish;
mod readme;
mod reference;
mod report;
mod retries;
#[cfg(feature = "s3")]
mod s3;
#[cfg(feature = "s3")]
mod s3_evidence;
#[cfg(feature = "s3")]
mod s3_requests;
#[cfg(feature = "s3")]
mod s3_warehouse;
mod schema;
mod seams;
mod sensor_reads;
mod sensors;
mod serve;
mod serve_lanes;
mod signed_plans;
mod simulate;
mod slo;
mod slurm;
mod special_files;
#[cfg(feature = "s3")]
mod store_budget;
mod store_contract;
mod store_integrity;
#[cfg(feature = "s3")]
mod store_stall;
mod support;
mod tables;
mod tables_maintained;
mod task_env;
mod zombie;
