//! The configs embedded in the binary (generated from `configs/` by build.rs).

use anyhow::{Result, bail};
use privopt_experiments::config::ExperimentConfig;

include!(concat!(env!("OUT_DIR"), "/embedded_configs.rs"));

/// The reproduction config with file stem `id`, parsed.
pub fn reproduction(id: &str) -> Result<ExperimentConfig> {
    match REPRODUCTIONS.iter().find(|(stem, _)| *stem == id) {
        Some((stem, text)) => Ok(ExperimentConfig::from_toml(
            text,
            &format!("configs/{stem}.toml"),
        )?),
        None => bail!(
            "unknown reproduction `{id}`; known: {}",
            REPRODUCTIONS
                .iter()
                .map(|(s, _)| *s)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The quickstart configs, parsed, in file order.
pub fn quickstart() -> Result<Vec<ExperimentConfig>> {
    QUICKSTART
        .iter()
        .map(|(stem, text)| {
            Ok(ExperimentConfig::from_toml(
                text,
                &format!("configs/quickstart/{stem}.toml"),
            )?)
        })
        .collect()
}

/// Prints `id — description` for every reproduction.
pub fn print_list() -> Result<()> {
    for (stem, text) in REPRODUCTIONS {
        let desc = ExperimentConfig::from_toml(text, stem)
            .map(|c| c.description)
            .unwrap_or_else(|e| format!("(invalid config: {e})"));
        outln!("{stem:<28} {desc}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_config_parses_and_is_named_after_its_file() {
        assert!(!REPRODUCTIONS.is_empty() && !QUICKSTART.is_empty());
        for (stem, text) in REPRODUCTIONS.iter().chain(QUICKSTART) {
            let c = ExperimentConfig::from_toml(text, stem).unwrap();
            assert_eq!(
                c.name.replace('-', "_"),
                stem.replace('-', "_"),
                "config name vs file {stem}"
            );
            assert!(!c.description.is_empty(), "{stem} has no description");
        }
        assert!(reproduction("no-such").is_err());
    }
}
