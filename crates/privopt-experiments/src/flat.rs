//! Typed reports written as `summary.json`'s flat keys.

use privopt_sim::metrics::Summary;
use serde::Serialize;

/// Adds every number of `report` to `summary` under `prefix` (see [`flatten_into`]). Reports
/// are structs of numbers, so serializing one cannot fail; if it did, nothing is added.
pub(crate) fn write_flat<T: Serialize + ?Sized>(summary: &mut Summary, prefix: &str, report: &T) {
    if let Ok(value) = serde_json::to_value(report) {
        flatten_into(summary, prefix, &value);
    }
}

/// Adds every number of `value` to `summary`, a nested field `a: { b }` under the key `a_b`
/// (`prefix_a_b` under a prefix); a boolean counts as 1 or 0.
fn flatten_into(summary: &mut Summary, prefix: &str, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                summary.insert(prefix.to_owned(), x);
            }
        }
        Value::Object(fields) => {
            for (k, v) in fields {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten_into(summary, &key, v);
            }
        }
        // serde_json turns a non-finite float into null (absent options are skipped, not
        // null), so a null field is a number that is not finite; `Report::Plain` is a bare null.
        Value::Null if !prefix.is_empty() => {
            summary.insert(prefix.to_owned(), f64::NAN);
        }
        Value::Bool(b) if !prefix.is_empty() => {
            summary.insert(prefix.to_owned(), if *b { 1.0 } else { 0.0 });
        }
        Value::Null | Value::Bool(_) | Value::String(_) | Value::Array(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_reports_flatten_to_underscored_keys_and_keep_non_finite_numbers() {
        let value = serde_json::json!({
            "a": 1.5,
            "b": { "c": 2, "d": { "e": -3.0 } },
            "nan": null,
            "yes": true,
            "label": "ignored",
        });
        let mut s = Summary::new();
        flatten_into(&mut s, "", &value);
        assert_eq!(s.len(), 5, "{s:?}");
        assert_eq!(
            (s["a"], s["b_c"], s["b_d_e"], s["yes"]),
            (1.5, 2.0, -3.0, 1.0)
        );
        assert!(s["nan"].is_nan());
        let mut s = Summary::new();
        flatten_into(&mut s, "run", &serde_json::json!({ "x": { "y": 4 } }));
        assert_eq!(s.keys().collect::<Vec<_>>(), ["run_x_y"]);
        // `Report::Plain` serializes as a bare null and adds nothing.
        let mut s = Summary::new();
        write_flat(&mut s, "", &privopt_sim::methods::Report::Plain);
        assert!(s.is_empty());
    }
}
