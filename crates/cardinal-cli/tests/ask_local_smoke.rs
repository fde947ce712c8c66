//! Real-model smoke test: `cardinal ask --llm local-small` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M,
//! in-process through llama.cpp) on one question per language, with the real embedder and a
//! scratch embedded store. The answer must be non-empty, in the question's language, and cite a
//! card the agent retrieved; a second identical run must be answered from the response cache.

use std::path::Path;
use std::process::{Command, Output};

use cardinal_agent::detect_lang;
use cardinal_kb::Lang;
use serde_json::Value;

mod common;

fn ask(tmp: &Path, question: &str, lang: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cardinal"))
        .arg("--data")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data"))
        .arg("--store-path")
        .arg(tmp.join("store"))
        .args([
            "ask",
            question,
            "--lang",
            lang,
            "--llm",
            "local-small",
            "--json",
        ])
        .arg("--cache-dir")
        .arg(tmp.join("cache"))
        .output()
        .expect("the cardinal binary runs")
}

fn parse(o: &Output) -> Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("ask --json prints a trace")
}

#[test]
fn the_small_local_model_answers_in_three_languages_with_a_retrieved_citation() {
    let tmp = tempfile::tempdir().unwrap();
    common::prebuilt_store(&tmp.path().join("store"));
    for (lang, want, question) in [
        (
            "en",
            Lang::En,
            "How long does it take for my lab results to show up in the portal, and who tells me if something is wrong?",
        ),
        (
            "es-419",
            Lang::Es419,
            "¿Cómo guardo la insulina cuando viajo y qué hago si hace mucho calor?",
        ),
        (
            "pt-BR",
            Lang::PtBr,
            "Como devo guardar a insulina em casa e por quanto tempo a caneta aberta dura?",
        ),
    ] {
        let turn = parse(&ask(tmp.path(), question, lang));
        let answer = turn["answer"].as_str().unwrap();
        assert_eq!(turn["refused"], false, "{lang}: refused: {turn:#}");
        assert!(turn["usage"]["completion_tokens"].as_u64().unwrap() > 0);
        let retrieved: Vec<&str> = turn["retrieval"]["cards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["card_id"].as_str().unwrap())
            .collect();
        let cited: Vec<&str> = turn["citations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert!(!cited.is_empty(), "{lang}: no citation in {answer:?}");
        for c in &cited {
            assert!(retrieved.contains(c), "{lang}: cited {c} not in {retrieved:?}");
            assert!(c.ends_with(&format!(".{lang}")), "{lang}: cited {c}");
        }
        // The language of the prose, with the citations taken out.
        let mut prose = answer.to_string();
        for c in &cited {
            prose = prose.replace(&format!("[{c}]"), " ");
        }
        assert!(prose.trim().len() > 20, "{lang}: answer too short: {answer:?}");
        assert_eq!(detect_lang(&prose), want, "{lang}: {answer:?}");
    }

    // The same question again: answered from the response cache, no model call.
    let o = ask(
        tmp.path(),
        "How long does it take for my lab results to show up in the portal, and who tells me if something is wrong?",
        "en",
    );
    parse(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cache: 1 hit(s), 0 model call(s)"),
        "stderr: {err}"
    );
}
