//! The weight files kept in the repository (`crates/learn/heads/`), built into the binary.
//! Each records the command and the data hash that made it; a test checks that hash against
//! the training files in `datasets/`.

/// The memory controller's heads (`thinkus train controller`).
pub const CONTROLLER: &str = include_str!("../heads/controller.json");

/// The knowledge manager's clause head (`thinkus train extract`).
pub const EXTRACT: &str = include_str!("../heads/extract.json");

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::file::{DataFile, HeadFile, data_hash};

    /// Each built-in file's heads were trained on the files it names, as they are now: a change
    /// to the training data without `thinkus train ...` fails here.
    fn matches_its_data(text: &str, engine: &str) {
        let file = HeadFile::parse(text).expect("the built-in file reads");
        assert_eq!(file.engine, engine);
        assert!(!file.data.is_empty(), "{engine}: the file names its training data");
        assert!(
            file.command.starts_with(&format!("thinkus train {engine} ")),
            "{engine}: the command that made it"
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for data in &file.data {
            assert!(
                file.command.contains(&format!("--data {}", data.path)),
                "{engine}: {} is in the command",
                data.path
            );
            let bytes = std::fs::read(root.join(&data.path)).expect("a training file named by the weight file");
            assert_eq!(
                &DataFile::of(&data.path, &bytes),
                data,
                "{engine}: {} changed since the heads were trained: run `{}`",
                data.path,
                file.command
            );
        }
        assert_eq!(file.data_sha256, data_hash(&file.data), "{engine}: the data hash");
    }

    #[test]
    fn the_controller_weights_match_their_training_data() {
        matches_its_data(super::CONTROLLER, "controller");
    }

    #[test]
    fn the_extraction_weights_match_their_training_data() {
        matches_its_data(super::EXTRACT, "extract");
    }
}
