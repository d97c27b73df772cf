//! The committed JSON Schema matches the Rust types, and every bundled
//! pipeline validates against it.

use crate::support::{assert_snapshot, repo};

#[test]
fn committed_schema_matches_the_types() {
    // WEIR_BLESS=1 rewrites the file from the types.
    assert_snapshot(
        &repo().join("schemas/pipeline.schema.json"),
        &weir::manifest::json_schema(),
    );
}

#[test]
fn every_bundled_pipeline_matches_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/pipeline.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema");
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join("pipelines")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let value: toml::Value =
                toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let json = serde_json::to_value(value).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&json)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 2);
}

#[test]
fn the_schema_rejects_what_the_loader_rejects() {
    let schema: serde_json::Value = serde_json::from_str(&weir::manifest::json_schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let bad: toml::Value = toml::from_str(
        "[pipeline]\nname='x'\ncode_version='1'\nwarehouse='w'\n[pools.p]\nslotz=1\n[tasks]\n",
    )
    .unwrap();
    assert!(
        !validator.is_valid(&serde_json::to_value(bad).unwrap()),
        "unknown keys are errors in both"
    );
}
