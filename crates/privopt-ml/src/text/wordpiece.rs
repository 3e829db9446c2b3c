//! BERT's uncased WordPiece tokenizer: lower-casing, accent stripping, splitting on whitespace
//! and punctuation, then greedy longest-match-first sub-words from `vocab.txt`.
//!
//! Differences from the reference `BertTokenizer`: accents are stripped by a table of the
//! Latin-1 and Latin Extended-A letters (no full Unicode decomposition), every character that
//! is neither alphanumeric nor whitespace counts as punctuation (the reference splits only
//! Unicode category P and ASCII symbols), and CJK characters get no special treatment. On
//! English text these agree with the reference.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{MlError, Result};

/// Longest word WordPiece tries to split; longer words become `[UNK]`.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary.
#[derive(Clone, Debug)]
pub struct WordPiece {
    ids: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
}

impl WordPiece {
    /// Reads `vocab.txt` (one token per line; the line number is the id).
    pub fn from_vocab_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| MlError::io(path, e))?;
        Self::from_vocab(&text).map_err(|reason| MlError::corrupt(path, reason))
    }

    /// Builds the vocabulary from the text of a `vocab.txt`.
    pub fn from_vocab(text: &str) -> std::result::Result<Self, String> {
        let ids: HashMap<String, u32> = text
            .lines()
            .enumerate()
            .map(|(i, t)| (t.to_owned(), i as u32))
            .collect();
        let get = |t: &str| {
            ids.get(t)
                .copied()
                .ok_or_else(|| format!("vocabulary lacks {t}"))
        };
        Ok(Self {
            unk: get("[UNK]")?,
            cls: get("[CLS]")?,
            sep: get("[SEP]")?,
            ids,
        })
    }

    /// Vocabulary size.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the vocabulary is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// `[CLS] tokens… [SEP]`, truncated to `max_len` ids (>= 2) in all.
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        self.encode_checked(text, max_len).0
    }

    /// [`Self::encode`], and whether the text was cut to fit `max_len`.
    pub fn encode_checked(&self, text: &str, max_len: usize) -> (Vec<u32>, bool) {
        let mut out = vec![self.cls];
        let mut truncated = false;
        'words: for word in basic_tokens(text) {
            for id in self.word_pieces(&word) {
                if out.len() + 1 >= max_len {
                    truncated = true;
                    break 'words;
                }
                out.push(id);
            }
        }
        out.push(self.sep);
        (out, truncated)
    }

    fn word_pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                let mut sub: String = chars[start..end].iter().collect();
                if start > 0 {
                    sub.insert_str(0, "##");
                }
                if let Some(&id) = self.ids.get(&sub) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    pieces.push(id);
                    start = end;
                }
                None => return vec![self.unk],
            }
        }
        pieces
    }
}

/// Lower-cased, accent-stripped words and punctuation marks.
fn basic_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_whitespace() || c.is_control() {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
        } else if c.is_alphanumeric() {
            match strip_accent(c) {
                Some(base) => word.push_str(base),
                None => word.push(c),
            }
        } else {
            if !word.is_empty() {
                tokens.push(std::mem::take(&mut word));
            }
            tokens.push(c.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

/// The base letters of a lower-case accented Latin letter.
fn strip_accent(c: char) -> Option<&'static str> {
    Some(match c {
        'à'..='å' | 'ā' | 'ă' | 'ą' => "a",
        'æ' => "ae",
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => "c",
        'è'..='ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => "e",
        'ì'..='ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' => "i",
        'ñ' | 'ń' | 'ņ' | 'ň' => "n",
        'ò'..='ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => "o",
        'ù'..='ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => "u",
        'ý' | 'ÿ' => "y",
        'ś' | 'š' | 'ş' => "s",
        'ź' | 'ż' | 'ž' => "z",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words_pieces_and_punctuation_like_bert() {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncafe\nun\n##want\n##ed\n,\nrunning\n!\n";
        let wp = WordPiece::from_vocab(vocab).unwrap();
        // "unwanted" → un ##want ##ed; accents stripped; punctuation split; unknown → [UNK].
        assert_eq!(
            wp.encode("The CAFÉ, unwanted running! xyz", 64),
            vec![2, 4, 5, 9, 6, 7, 8, 10, 11, 1, 3]
        );
        // Truncation keeps [CLS] … [SEP] within max_len.
        assert_eq!(wp.encode("the the the the", 4), vec![2, 4, 4, 3]);
        assert_eq!(wp.encode_checked("the the", 4), (vec![2, 4, 4, 3], false));
        assert!(wp.encode_checked("the the the", 4).1);
        assert!(WordPiece::from_vocab("a\nb\n").is_err());
    }
}
