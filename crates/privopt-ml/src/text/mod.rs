//! Text: BERT's WordPiece tokenizer and a MiniLM sentence classifier for zeroth-order
//! fine-tuning.

mod minilm;
mod wordpiece;

pub use minilm::{EncoderShape, MiniLmClassifier, Trainable};
pub use wordpiece::WordPiece;
