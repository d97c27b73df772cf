//! The manifest many tests start from, built instead of written out: a
//! pipeline (code_version "1", warehouse `wh`), static partitions, pools,
//! retry classes and `sh` tasks writing CSV keyed by `id`. Tables it does
//! not know go in whole with `table`.

use super::Sandbox;

/// A manifest under construction; the text reads as one written by hand.
pub(crate) struct Pipeline {
    text: String,
}

impl Pipeline {
    /// `[pipeline]` named `name`, code_version "1", warehouse `wh`.
    pub(crate) fn new(name: &str) -> Pipeline {
        Pipeline {
            text: format!(
                "\n[pipeline]\nname = \"{name}\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n"
            ),
        }
    }

    /// A table (or several) as written, after a blank line.
    pub(crate) fn table(mut self, toml: &str) -> Pipeline {
        self.text.push('\n');
        self.text.push_str(toml.trim_matches('\n'));
        self.text.push('\n');
        self
    }

    /// Static partitions `dimension` over `keys`.
    pub(crate) fn static_keys<K: AsRef<str>>(self, dimension: &str, keys: &[K]) -> Pipeline {
        let keys: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
        self.table(&format!(
            "[partitions.{dimension}]\nkind = \"static\"\nkeys = {keys:?}"
        ))
    }

    /// Pool `name` of `slots` slots.
    pub(crate) fn pool(self, name: &str, slots: u32) -> Pipeline {
        self.table(&format!("[pools.{name}]\nslots = {slots}"))
    }

    /// Retry class `name`: `max_attempts`, backoff from `initial` to `max`.
    pub(crate) fn retry(self, name: &str, max_attempts: u32, initial: &str, max: &str) -> Pipeline {
        self.table(&format!(
            "[retry.{name}]\nmax_attempts = {max_attempts}\nbackoff = {{ initial = \"{initial}\", max = \"{max}\" }}"
        ))
    }

    /// Task `name` running `sh <name>.sh` into dataset `dataset` (CSV,
    /// grain `id`), with `more` (TOML lines) appended to its table.
    pub(crate) fn sh_task(self, name: &str, dataset: &str, more: &str) -> Pipeline {
        self.table(&format!(
            "[tasks.{name}]\ncommand = [\"sh\", \"{name}.sh\"]\noutput = {{ dataset = \"{dataset}\", grain = [\"id\"] }}\n{more}"
        ))
    }

    /// A sandbox holding it as `m.toml`.
    pub(crate) fn sandbox(&self) -> Sandbox {
        Sandbox::new(&self.text)
    }
}

// The builder writes what the tests it replaced wrote by hand.
#[test]
fn a_built_manifest_is_the_one_written_by_hand() {
    let built = Pipeline::new("pools")
        .static_keys("k", &["k01", "k02"])
        .pool("narrow", 3)
        .retry("fast", 4, "10ms", "20ms")
        .sh_task("t", "out", "pool = \"narrow\"")
        .table("[datasets.d]\npath = \"d.csv\"\n");
    let by_hand = r#"
[pipeline]
name = "pools"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k01", "k02"]

[pools.narrow]
slots = 3

[retry.fast]
max_attempts = 4
backoff = { initial = "10ms", max = "20ms" }

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
pool = "narrow"

[datasets.d]
path = "d.csv"
"#;
    assert_eq!(built.text, by_hand);
}
