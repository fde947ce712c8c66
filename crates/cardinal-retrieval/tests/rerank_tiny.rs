//! The cross-encoder re-ranker path with a tiny BERT sequence-classification model that this
//! test writes itself (random weights): no cross-encoder weights are obtainable here.

use std::path::Path;
use std::sync::Arc;

use cardinal_embed::{CrossEncoder, Embedder};
use cardinal_kb::Lang;
use cardinal_models::safetensors::{write_f32, TensorF32};
use cardinal_retrieval::store::EmbeddedStore;
use cardinal_retrieval::{IndexedChunk, Mode, RetrievalConfig, Retriever};

const WORDS: [&str; 16] = [
    "insulin", "fridge", "refill", "portal", "dose", "missed", "pharmacy", "travel", "keep", "the",
    "in", "my", "where", "do", "i", "request",
];
const HIDDEN: usize = 8;
const FF: usize = 16;
const VOCAB: usize = 4 + WORDS.len();

/// Deterministic pseudo-random weights (SplitMix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

fn write_tiny_cross_encoder(dir: &Path) {
    let mut rng = Rng(7);
    let mut tensors = Vec::new();
    let mut t = |name: &str, shape: Vec<usize>, ones: bool| {
        let n = shape.iter().product();
        let data = (0..n)
            .map(|_| if ones { 1.0 } else { rng.next() })
            .collect();
        tensors.push(TensorF32 {
            name: name.to_string(),
            shape,
            data,
        });
    };
    t(
        "bert.embeddings.word_embeddings.weight",
        vec![VOCAB, HIDDEN],
        false,
    );
    t(
        "bert.embeddings.position_embeddings.weight",
        vec![64, HIDDEN],
        false,
    );
    t(
        "bert.embeddings.token_type_embeddings.weight",
        vec![2, HIDDEN],
        false,
    );
    t("bert.embeddings.LayerNorm.weight", vec![HIDDEN], true);
    t("bert.embeddings.LayerNorm.bias", vec![HIDDEN], false);
    let l = "bert.encoder.layer.0";
    for m in [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
    ] {
        t(&format!("{l}.{m}.weight"), vec![HIDDEN, HIDDEN], false);
        t(&format!("{l}.{m}.bias"), vec![HIDDEN], false);
    }
    t(
        &format!("{l}.attention.output.LayerNorm.weight"),
        vec![HIDDEN],
        true,
    );
    t(
        &format!("{l}.attention.output.LayerNorm.bias"),
        vec![HIDDEN],
        false,
    );
    t(
        &format!("{l}.intermediate.dense.weight"),
        vec![FF, HIDDEN],
        false,
    );
    t(&format!("{l}.intermediate.dense.bias"), vec![FF], false);
    t(&format!("{l}.output.dense.weight"), vec![HIDDEN, FF], false);
    t(&format!("{l}.output.dense.bias"), vec![HIDDEN], false);
    t(&format!("{l}.output.LayerNorm.weight"), vec![HIDDEN], true);
    t(&format!("{l}.output.LayerNorm.bias"), vec![HIDDEN], false);
    t("bert.pooler.dense.weight", vec![HIDDEN, HIDDEN], false);
    t("bert.pooler.dense.bias", vec![HIDDEN], false);
    t("classifier.weight", vec![1, HIDDEN], false);
    t("classifier.bias", vec![1], false);
    let mut f = std::fs::File::create(dir.join("model.safetensors")).unwrap();
    write_f32(&mut f, &tensors, "tiny").unwrap();
    let config = serde_json::json!({
        "architectures": ["BertForSequenceClassification"], "model_type": "bert",
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": FF, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "id2label": {"0": "LABEL_0"}
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut vocab = serde_json::Map::new();
    for (i, s) in ["[PAD]", "[UNK]", "[CLS]", "[SEP]"].iter().enumerate() {
        vocab.insert(s.to_string(), i.into());
    }
    for (i, w) in WORDS.iter().enumerate() {
        vocab.insert(w.to_string(), (i + 4).into());
    }
    let special = |c: &str, id: usize| {
        serde_json::json!({"id": id, "content": c, "single_word": false,
        "lstrip": false, "rstrip": false, "normalized": false, "special": true})
    };
    let tok = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special("[PAD]", 0), special("[UNK]", 1), special("[CLS]", 2), special("[SEP]", 3)],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
}

/// Lexical-only retrieval never embeds; any call is a bug.
struct NoEmbedder;
impl Embedder for NoEmbedder {
    fn id(&self) -> String {
        "none".into()
    }
    fn dim(&self) -> usize {
        0
    }
    fn embed_queries(&self, _: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        panic!("lexical-only retrieval must not embed")
    }
    fn embed_passages(&self, _: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        panic!("lexical-only retrieval must not embed")
    }
}

#[test]
fn pipeline_reorders_by_cross_encoder_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let model_dir = tmp.path().join("tiny-ce");
    std::fs::create_dir_all(&model_dir).unwrap();
    write_tiny_cross_encoder(&model_dir);
    let ce = CrossEncoder::load(&model_dir).expect("tiny cross-encoder loads");

    let texts = [
        ("insulin.en", "keep insulin in the fridge"),
        ("travel.en", "travel with insulin keep it in my pharmacy"),
        ("refills.en", "request refill in the portal"),
        ("dose.en", "missed dose do i keep the dose"),
    ];
    let chunks: Vec<IndexedChunk> = texts
        .iter()
        .map(|(card, text)| IndexedChunk {
            chunk_id: format!("{card}#0"),
            card_id: card.to_string(),
            lang: Lang::En,
            topic: card.trim_end_matches(".en").to_string(),
            text: text.to_string(),
        })
        .collect();
    let query = "where do i keep my insulin in the fridge";
    // The cross-encoder's own ranking of the candidates.
    let passages: Vec<&str> = texts.iter().map(|(_, t)| *t).collect();
    let scores = ce.score(query, &passages).unwrap();
    assert!(scores.iter().all(|s| s.is_finite()));
    let mut expected: Vec<(f32, &str)> = scores
        .iter()
        .zip(&texts)
        .map(|(s, (c, _))| (*s, *c))
        .collect();
    expected.sort_by(|a, b| b.0.total_cmp(&a.0));
    let distinct: std::collections::BTreeSet<String> =
        scores.iter().map(|s| format!("{s:.6}")).collect();
    assert_eq!(
        distinct.len(),
        scores.len(),
        "random weights give distinct scores: {scores:?}"
    );

    let store = EmbeddedStore::open(&tmp.path().join("store")).unwrap();
    let cfg = RetrievalConfig {
        top_k: 4,
        ..Default::default()
    };
    let plain = Retriever::new(
        cfg.clone(),
        &chunks,
        Box::new(store),
        Arc::new(NoEmbedder),
        None,
    )
    .unwrap();
    let before = plain.retrieve(query, Lang::En, Mode::LexicalOnly).unwrap();
    let store = EmbeddedStore::open(&tmp.path().join("store")).unwrap();
    let reranked = Retriever::new(
        cfg,
        &chunks,
        Box::new(store),
        Arc::new(NoEmbedder),
        Some(Box::new(ce)),
    )
    .unwrap();
    let after = reranked
        .retrieve(query, Lang::En, Mode::LexicalOnly)
        .unwrap();
    let got: Vec<&str> = after.cards.iter().map(|c| c.card_id.as_str()).collect();
    let candidates: std::collections::BTreeSet<&str> =
        before.cards.iter().map(|c| c.card_id.as_str()).collect();
    let want: Vec<&str> = expected
        .iter()
        .map(|(_, c)| *c)
        .filter(|c| candidates.contains(c))
        .collect();
    assert_eq!(
        got, want,
        "re-ranked order follows the cross-encoder (scores {scores:?})"
    );
    for c in &after.cards {
        assert!(c.rerank_score.is_some());
    }
}
