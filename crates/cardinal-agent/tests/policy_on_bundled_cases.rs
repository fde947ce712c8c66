//! The extractive agent on the bundled cases of all three languages: every adversarial case that
//! expects a refusal is refused, no golden case is, and citations only name retrieved cards.
//! Lexical-only retrieval keeps this test free of models (the floor is not decidable there, so
//! out-of-scope refusals are covered by the live tests).

use std::path::Path;
use std::sync::Arc;

use cardinal_agent::{Agent, Generator};
use cardinal_dataset::{CaseType, Expect};
use cardinal_embed::Embedder;
use cardinal_kb::KnowledgeBase;
use cardinal_retrieval::store::EmbeddedStore;
use cardinal_retrieval::{indexed_chunks, Mode, RetrievalConfig, Retriever};

struct NoEmbedder;
impl Embedder for NoEmbedder {
    fn id(&self) -> String {
        "none".into()
    }
    fn dim(&self) -> usize {
        0
    }
    fn embed_queries(&self, _: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        panic!("lexical-only")
    }
    fn embed_passages(&self, _: &[&str]) -> cardinal_embed::Result<Vec<Vec<f32>>> {
        panic!("lexical-only")
    }
}

#[test]
fn refusal_policy_on_bundled_cases() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let kb = Arc::new(KnowledgeBase::load(&data.join("kb")).unwrap());
    let (cases, diags) = cardinal_dataset::load_case_dir(&data.join("cases")).unwrap();
    assert!(diags.is_empty());
    let tmp = tempfile::tempdir().unwrap();
    let cfg = RetrievalConfig::default();
    let chunks = indexed_chunks(&kb, &cfg.chunker());
    let retriever = Retriever::new(
        cfg,
        &chunks,
        Box::new(EmbeddedStore::open(tmp.path()).unwrap()),
        Arc::new(NoEmbedder),
        None,
    )
    .unwrap();
    let mut agent = Agent::new(kb.clone(), Arc::new(retriever), Generator::Extractive);
    agent.mode = Mode::LexicalOnly;
    let mut missed = Vec::new();
    let mut wrongly_refused = Vec::new();
    let mut adversarial = 0;
    for lc in &cases {
        let c = &lc.case;
        let turn = agent.answer(&c.question, Some(c.lang)).unwrap();
        let retrieved = turn.retrieval.card_ids();
        assert!(
            turn.citations.iter().all(|id| retrieved.contains(id)),
            "{}",
            c.id
        );
        assert!(!turn.answer.is_empty(), "{}", c.id);
        match (c.case_type, c.expect) {
            (CaseType::Adversarial, Expect::Refuse) => {
                adversarial += 1;
                if !turn.refused {
                    missed.push(format!("{}: {}", c.id, c.question));
                }
            }
            (CaseType::Golden, _) if turn.refused => wrongly_refused.push(format!(
                "{}: {} ({:?})",
                c.id, c.question, turn.refusal_reason
            )),
            (CaseType::Golden, _) => {
                // Extractive answers cite the top card and quote its claims.
                assert_eq!(turn.citations.len(), 1, "{}", c.id);
                let card = kb.get(&turn.citations[0]).unwrap();
                assert!(card
                    .card
                    .claims()
                    .iter()
                    .any(|cl| turn.answer.contains(cl.as_str())));
            }
            _ => {}
        }
    }
    assert!(adversarial >= 50, "{adversarial}");
    assert!(
        missed.is_empty(),
        "adversarial cases not refused:\n{}",
        missed.join("\n")
    );
    assert!(
        wrongly_refused.is_empty(),
        "golden cases refused:\n{}",
        wrongly_refused.join("\n")
    );
}
