//! Fit the safety policy on the TRAIN split and measure alternatives.
//!
//! ```sh
//! cargo run --release -p cardinal-agent --example policy_fit -- --alternatives
//! cargo run --release -p cardinal-agent --example policy_fit -- --write data/policy/policy-v2.json
//! cargo run --release -p cardinal-agent --example policy_fit -- --alternatives --test
//! cargo run --release -p cardinal-agent --example policy_fit -- --second-opinion qwen2.5-coder-1.5b --alternatives
//! cargo run --release -p cardinal-agent --example policy_fit -- --intent embeddinggemma-300m --alternatives --test --holdout
//! ```
//!
//! `--intent MODEL` embeds every case with a second, larger encoder (through an on-disk vector
//! cache, `.cardinal/cache/intent-vectors`) and adds the alternatives that read it (M … R).
//! `--holdout` scores the fitted alternatives on the holdout split as well (reported only).
//! `POLICY_CHOICE=<letter>` keeps one alternative; `POLICY_EXCLUDE=<id part>` leaves the train
//! cases whose id contains it out of the fit (e.g. `-s4-`, a later training batch).
//!
//! `--second-opinion MODEL` asks the local model the policy's yes/no checks for every case
//! (through the default probe cache, `.cardinal/cache/probes`) and adds the alternatives that
//! read them (J, K, L). With `--reading LAYER` the same model is not asked the checks; its
//! block `LAYER`'s output averaged over the message is read instead (same cache) and the
//! alternative that appends it to M's features is added (V; needs `--intent`).
//! `POLICY_CHOICE` may list several letters separated by commas (`M,V`). `POLICY_BATCH_CV=1`
//! adds, for each alternative, its figures on the v2 train cases when fitted on the other train
//! batches only (a train-only check grouped by writing batch).
//!
//! `--alternatives` prints the cross-validated (train-only) figures of every alternative;
//! `--test` additionally fits each on all of train and scores it on the test split (for the
//! decision record — the choice is made on the train figures). `--write` fits the chosen
//! options and writes the policy file. Fitting reads only `TrainSet::from_cases`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cardinal_agent::policy::fit::{
    case_features, fit_with_features, CaseFeatures, Confusion, Featurizer, RetrieverFeaturizer,
    TrainSet,
};
use cardinal_agent::policy::model::Classifier;
use cardinal_agent::policy::{decide, FitOptions, Signals};
use cardinal_dataset::{LoadedCase, Split};
use cardinal_embed::{BertEmbedder, Embedder, EmbedderOptions, GemmaEmbedder, QueryCache};
use cardinal_kb::{KnowledgeBase, Lang};
use cardinal_retrieval::store::EmbeddedStore;
use cardinal_retrieval::{indexed_chunks, ingest, RetrievalConfig, Retriever};

/// A safety case v2 (`<lang>-s2-NNN`): the population the test split was drawn from. The later
/// batches carry a form too, so the id, not the form, says it.
fn is_v2(id: &str) -> bool {
    id.contains("-s2-")
}

/// The project's featurizer, with the local model either asked the checks or read (the checks
/// cost a prompt pass per message, so a reading run does not ask them).
struct ChecksOrReading<'a> {
    inner: RetrieverFeaturizer<'a>,
    checks: bool,
}

impl Featurizer for ChecksOrReading<'_> {
    fn embedder_id(&self) -> String {
        self.inner.embedder_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.inner.embed(texts)
    }
    fn best_cosine(&self, vector: &[f32], lang: Lang) -> Result<Option<f32>, String> {
        self.inner.best_cosine(vector, lang)
    }
    fn second_opinion_info(&self) -> Option<cardinal_agent::policy::SecondOpinionInfo> {
        self.inner.second_opinion_info()
    }
    fn second_opinion(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        if self.checks {
            self.inner.second_opinion(question)
        } else {
            Ok(None)
        }
    }
    fn reading(&self, question: &str) -> Result<Option<Vec<f32>>, String> {
        self.inner.reading(question)
    }
    fn intent_info(&self) -> Option<cardinal_agent::policy::IntentEncoderInfo> {
        self.inner.intent_info()
    }
    fn intent(&self, texts: &[&str]) -> Result<Option<Vec<Vec<f32>>>, String> {
        self.inner.intent(texts)
    }
}

/// One table row per language: refusal recall, false refusals, escalated, out-of-scope
/// answered (rate and counts), then the thresholds.
fn print_rows(name: &str, label: &str, per: &BTreeMap<Lang, Confusion>, thresholds: &str) {
    for (lang, c) in per {
        println!(
            "| {name} | {label} | {lang} | {:.3} ({}/{}) | {:.3} ({}/{}) | {:.3} ({}/{}) | {:.3} ({}/{}) | {thresholds} |",
            c.recall(), c.refused, c.refuse_n,
            c.false_refusal_rate(), c.benign_refused, c.benign_n,
            c.escalated as f64 / c.emergency_n.max(1) as f64, c.escalated, c.emergency_n,
            c.oos_answered as f64 / c.oos_n.max(1) as f64, c.oos_answered, c.oos_n,
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let write = args
        .iter()
        .position(|a| a == "--write")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let progress = |l: &str| eprintln!("{l}");
    let inst = cardinal_models::ensure(
        "e5-small",
        &cardinal_models::PullOptions::from_env(&progress),
    )
    .expect("e5-small");
    let embedder = Arc::new(
        BertEmbedder::load(
            &inst.dir,
            EmbedderOptions {
                query_prefix: inst.manifest.query_prefix.clone(),
                passage_prefix: inst.manifest.passage_prefix.clone(),
                ..Default::default()
            },
        )
        .expect("e5 loads"),
    );
    let kb = KnowledgeBase::load(&data.join("kb")).expect("kb");
    let (cases, diags) = cardinal_dataset::load_case_dir(&data.join("cases")).expect("cases");
    assert!(diags.is_empty(), "{diags}");
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = RetrievalConfig::default();
    let mut store = EmbeddedStore::open(tmp.path()).expect("store");
    ingest(
        &mut store,
        embedder.as_ref(),
        &kb,
        &cfg.chunker(),
        32,
        &mut |_, _| {},
    )
    .expect("ingest");
    let chunks = indexed_chunks(&kb, &cfg.chunker());
    let retriever =
        Retriever::new(cfg, &chunks, Box::new(store), embedder, None).expect("retriever");
    let so_name = args
        .iter()
        .position(|a| a == "--second-opinion")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let so_model = so_name.as_deref().map(|name| {
        let inst =
            cardinal_models::ensure(name, &cardinal_models::PullOptions::from_env(&progress))
                .expect("second-opinion model");
        let file = inst
            .manifest
            .files
            .iter()
            .find(|f| f.name.ends_with(".gguf"))
            .expect("a .gguf file");
        let m = cardinal_llm_local::LocalModel::load(
            &inst.file(&file.name),
            cardinal_llm_local::LocalOptions {
                sha256: Some(file.sha256.clone()),
                context_size: 2048,
                ..Default::default()
            },
        )
        .expect("load the second-opinion model");
        let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cardinal/cache/probes");
        cardinal_llm::CachedYesNo::new(m, cache, true).expect("probe cache")
    });
    let intent_name = args
        .iter()
        .position(|a| a == "--intent")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let intent_encoder = intent_name.as_deref().map(|name| {
        let inst =
            cardinal_models::ensure(name, &cardinal_models::PullOptions::from_env(&progress))
                .expect("intent encoder");
        let enc = GemmaEmbedder::load(&inst.dir, GemmaEmbedder::default_options())
            .expect("intent encoder loads");
        let key = cardinal_digest::sha256_hex(enc.id())[..16].to_string();
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cardinal/cache/intent-vectors");
        QueryCache::open(Arc::new(enc), &dir, &key).expect("intent-vector cache")
    });
    if let Some(enc) = &intent_encoder {
        // Every case's texts in one batch (train, test and holdout: the vectors are cached,
        // nothing is fitted here).
        let texts: Vec<String> = cases
            .iter()
            .flat_map(|c| {
                let mut t = vec![c.case.question.clone()];
                t.extend(cardinal_agent::policy::segments(&c.case.question));
                t
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let t0 = std::time::Instant::now();
        let n = enc.prefetch(&refs).expect("intent vectors");
        eprintln!(
            "intent encoder: {n} texts embedded in {:.1}s",
            t0.elapsed().as_secs_f64()
        );
    }
    let reading_layer: Option<usize> = args
        .iter()
        .position(|a| a == "--reading")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("--reading takes a block number"));
    let fz = RetrieverFeaturizer {
        retriever: &retriever,
        second_opinion: so_name
            .as_deref()
            .zip(so_model.as_ref())
            .map(|(n, m)| (n, m as &dyn cardinal_llm::YesNoModel)),
        intent: intent_name
            .as_deref()
            .zip(intent_encoder.as_ref())
            .map(|(n, e)| (n, e as &dyn Embedder)),
        reading_layer,
    };
    let fz = ChecksOrReading {
        inner: fz,
        checks: reading_layer.is_none(),
    };

    // Fitting input: the train split only.
    let mut train = TrainSet::from_cases(&cases).expect("train set");
    if std::env::var("POLICY_TRAIN").as_deref() == Ok("v2") {
        // Only the safety cases v2; the older cases were labelled before the v2 class
        // definitions.
        train.retain(|c| is_v2(&c.id));
    }
    if let Ok(pattern) = std::env::var("POLICY_EXCLUDE") {
        // Leave a batch out of the fit (e.g. `-s4-`), to compare fits with and without it on
        // the same out-of-fold population.
        train.retain(|c| !c.id.contains(&pattern));
    }
    eprintln!(
        "train: {} cases, sha256 {}",
        train.cases().len(),
        train.sha256()
    );
    let t0 = std::time::Instant::now();
    let n_train = train.cases().len();
    let train_feats: Vec<CaseFeatures> = train
        .cases()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if (i + 1) % 100 == 0 {
                eprintln!(
                    "train features {}/{n_train} ({:.0}s)",
                    i + 1,
                    t0.elapsed().as_secs_f64()
                );
            }
            case_features(&fz, &c.question, c.lang, true).expect("features")
        })
        .collect();
    eprintln!("train features in {:.1}s", t0.elapsed().as_secs_f64());

    let base = FitOptions::default();
    let mut alternatives: Vec<(&str, FitOptions)> = vec![
        (
            "A prototype (nearest centroid), no rules",
            FitOptions {
                classifier: Classifier::Prototype,
                rules: false,
                ..base.clone()
            },
        ),
        (
            "B softmax, no rules",
            FitOptions {
                rules: false,
                ..base.clone()
            },
        ),
        ("C softmax + injection markers", base.clone()),
        (
            "D softmax + markers + sentences",
            FitOptions {
                segments: true,
                ..base.clone()
            },
        ),
        (
            "E softmax + markers + cosine feature",
            FitOptions {
                cosine_feature: true,
                ..base.clone()
            },
        ),
        (
            "F softmax + markers + sentences + cosine",
            FitOptions {
                segments: true,
                cosine_feature: true,
                ..base.clone()
            },
        ),
        (
            "G softmax l2=0.1 + markers + sentences",
            FitOptions {
                segments: true,
                l2: 0.1,
                ..base.clone()
            },
        ),
        (
            "H softmax l2=0.001 + markers + sentences",
            FitOptions {
                segments: true,
                l2: 0.001,
                ..base.clone()
            },
        ),
        (
            "I softmax unbalanced + markers + sentences",
            FitOptions {
                segments: true,
                balanced: false,
                ..base.clone()
            },
        ),
    ];
    if fz.inner.second_opinion.is_some() && fz.checks {
        for (name, weight) in [
            ("J E + second opinion", 1.0),
            ("K E + second opinion x3", 3.0),
            ("L E + second opinion x10", 10.0),
        ] {
            alternatives.push((
                name,
                FitOptions {
                    cosine_feature: true,
                    second_opinion: true,
                    second_opinion_weight: weight,
                    ..base.clone()
                },
            ));
        }
    } else if fz.checks {
        eprintln!("no --second-opinion MODEL: alternatives J-L are skipped");
    } else {
        eprintln!("--reading: the checks are not asked, alternatives J-L and S-U are skipped");
    }
    if fz.inner.intent.is_some() {
        for (name, cosine, l2, segments, query_embedding) in [
            ("M E + intent encoder", true, base.l2, false, true),
            ("N C + intent encoder", false, base.l2, false, true),
            ("O M, l2=0.1", true, 0.1, false, true),
            ("P M + sentences", true, base.l2, true, true),
            ("Q M without the e5 embedding", true, base.l2, false, false),
            ("R M, l2=0.001", true, 0.001, false, true),
        ] {
            alternatives.push((
                name,
                FitOptions {
                    cosine_feature: cosine,
                    intent: true,
                    l2,
                    segments,
                    query_embedding,
                    ..base.clone()
                },
            ));
        }
        if fz.inner.second_opinion.is_some() && fz.checks {
            // The local model's yes/no second opinion on top of M (J-L did the same on E).
            for (name, weight) in [
                ("S M + second opinion", 1.0),
                ("T M + second opinion x3", 3.0),
                ("U M + second opinion x10", 10.0),
            ] {
                alternatives.push((
                    name,
                    FitOptions {
                        cosine_feature: true,
                        intent: true,
                        second_opinion: true,
                        second_opinion_weight: weight,
                        ..base.clone()
                    },
                ));
            }
        }
        if fz.inner.second_opinion.is_some() && reading_layer.is_some() {
            // The local model's middle-layer reading of the message on top of M.
            alternatives.push((
                "V M + local model's reading",
                FitOptions {
                    cosine_feature: true,
                    intent: true,
                    reading_layer,
                    ..base.clone()
                },
            ));
        }
    } else {
        eprintln!("no --intent MODEL: alternatives M-V are skipped");
    }
    if let Ok(chosen) = std::env::var("POLICY_CHOICE") {
        let letters: Vec<&str> = chosen.split(',').map(str::trim).collect();
        alternatives.retain(|(n, _)| letters.iter().any(|l| n.starts_with(l)));
    }

    let mut scored: Vec<(&str, Split)> = Vec::new();
    if flag("--test") {
        scored.push(("test", Split::Test));
    }
    if flag("--holdout") {
        scored.push(("holdout", Split::Holdout));
    }
    // Test and holdout features are computed only to score already-fitted models.
    let scored: Vec<(&str, Vec<&LoadedCase>, Vec<CaseFeatures>)> = scored
        .into_iter()
        .map(|(label, split)| {
            let cs: Vec<&LoadedCase> = cases
                .iter()
                .filter(|c| c.case.split == Some(split))
                .collect();
            let fs = cs
                .iter()
                .map(|c| case_features(&fz, &c.case.question, c.case.lang, true).expect("features"))
                .collect();
            (label, cs, fs)
        })
        .collect();

    if flag("--alternatives") {
        println!("| alternative | split | lang | refusal recall | false refusals | escalated | out-of-scope answered | thresholds |");
        println!("|---|---|---|---|---|---|---|---|");
        for (name, opt) in &alternatives {
            let m = fit_with_features(
                &train,
                &train_feats,
                &fz.embedder_id(),
                fz.second_opinion_info(),
                fz.intent_info(),
                opt,
            )
            .expect("fit");
            if let Ok(dir) = std::env::var("POLICY_ALT_DIR") {
                let letter = name.split(' ').next().unwrap_or("x");
                let text = serde_json::to_string(&m).expect("serialise");
                std::fs::write(Path::new(&dir).join(format!("{letter}.json")), text + "\n")
                    .expect("write alternative");
            }
            // Out-of-fold signals of the train cases (computed once; read by the v2 CV
            // figures, the dump and the explanation below).
            let oof = cardinal_agent::policy::fit::out_of_fold(
                &train,
                &train_feats,
                opt,
                &fz.embedder_id(),
            );
            {
                // Out-of-fold figures on the v2 cases of train only (ids `-s2-`: the
                // population of the test split), so alternatives fitted on different train
                // sets (with or without a later training batch) compare.
                let mut per: BTreeMap<Lang, Confusion> = BTreeMap::new();
                for (i, tc) in train.cases().iter().enumerate() {
                    if is_v2(&tc.id) {
                        let d = decide(&oof[i], train_feats[i].rule_hit, &m.thresholds, opt);
                        per.entry(tc.lang).or_default().add(tc.class, &d);
                    }
                }
                print_rows(name, "train v2 cases (5-fold CV)", &per, "");
            }
            if std::env::var("POLICY_BATCH_CV").is_ok() {
                // Train only, grouped by writing batch: fitted on the train cases of the other
                // batches (the older cases and the later batches), scored on the v2 train cases.
                // Out-of-fold figures above split siblings of one batch across folds; this
                // does not.
                let keep: Vec<bool> = train.cases().iter().map(|c| !is_v2(&c.id)).collect();
                let mut others = train.clone();
                others.retain(|c| !is_v2(&c.id));
                let feats: Vec<CaseFeatures> = train_feats
                    .iter()
                    .zip(&keep)
                    .filter(|(_, k)| **k)
                    .map(|(f, _)| f.clone())
                    .collect();
                let mb = fit_with_features(
                    &others,
                    &feats,
                    &fz.embedder_id(),
                    fz.second_opinion_info(),
                    fz.intent_info(),
                    opt,
                )
                .expect("fit on the other batches");
                let mut per: BTreeMap<Lang, Confusion> = BTreeMap::new();
                for (i, tc) in train.cases().iter().enumerate() {
                    if !keep[i] {
                        let f = &train_feats[i];
                        let s = Signals::of(&mb, f);
                        let d = decide(&s, f.rule_hit, &mb.thresholds, &mb.options);
                        per.entry(tc.lang).or_default().add(tc.class, &d);
                    }
                }
                print_rows(
                    name,
                    "train v2 cases (fitted on the other batches)",
                    &per,
                    "",
                );
            }
            if let Ok(path) = std::env::var("POLICY_DUMP_OOF") {
                // Train-only out-of-fold signals, for prototyping a second stage.
                let lines: Vec<String> = train
                    .cases()
                    .iter()
                    .zip(&oof)
                    .zip(&train_feats)
                    .map(|((tc, s), f)| {
                        serde_json::json!({"id": tc.id, "lang": tc.lang, "class": tc.class,
                            "form": tc.form, "rule_hit": f.rule_hit, "signals": s,
                            "so": f.second_opinion, "thresholds": m.thresholds})
                        .to_string()
                    })
                    .collect();
                std::fs::write(&path, lines.join("\n") + "\n").expect("dump");
            }
            if std::env::var("POLICY_EXPLAIN").is_ok() {
                // Train-only: the out-of-fold decisions that are wrong.
                for (i, tc) in train.cases().iter().enumerate() {
                    let d = decide(&oof[i], train_feats[i].rule_hit, &m.thresholds, opt);
                    let mut c = Confusion::default();
                    c.add(tc.class, &d);
                    let wrong = c.benign_refused
                        + c.oos_answered
                        + (c.refuse_n - c.refused)
                        + (c.emergency_n - c.escalated);
                    if wrong > 0 {
                        eprintln!(
                            "  {name} | {} | {} | {:?} | unsafe {:.2} top {} | oos {:.2} cos {:.3} | {}",
                            tc.id,
                            tc.class,
                            d,
                            oof[i].unsafe_mass,
                            oof[i].top_unsafe,
                            oof[i].p_out_of_scope,
                            oof[i].best_cosine.unwrap_or(0.0),
                            tc.question
                        );
                    }
                }
            }
            let th = format!(
                "unsafe ≥ {:.2}, oos ≥ {:.2}, floor {:.3}",
                m.thresholds.unsafe_min, m.thresholds.out_of_scope_min, m.thresholds.cosine_floor
            );
            for lang in Lang::ALL {
                let g = |k: &str| {
                    m.train
                        .cv
                        .get(&format!("{lang}.{k}"))
                        .copied()
                        .unwrap_or(f64::NAN)
                };
                println!(
                    "| {name} | train (5-fold CV) | {lang} | {:.3} | {:.3} | {:.3} | {:.3} | {th} |",
                    g("refusal_recall"),
                    g("false_refusal_rate"),
                    g("escalated"),
                    g("out_of_scope_answered")
                );
            }
            for (label, split_cases, split_feats) in &scored {
                let mut per: BTreeMap<Lang, Confusion> = BTreeMap::new();
                for (c, f) in split_cases.iter().zip(split_feats) {
                    let s = Signals::of(&m, f);
                    let d = decide(&s, f.rule_hit, &m.thresholds, &m.options);
                    per.entry(c.case.lang)
                        .or_default()
                        .add(c.case.class.expect("class"), &d);
                }
                print_rows(name, label, &per, &th);
            }
        }
    }

    if let Some(path) = write {
        let name = std::env::var("POLICY_CHOICE").unwrap_or_else(|_| "E".into());
        assert!(
            !name.contains(','),
            "--write needs POLICY_CHOICE to name one alternative"
        );
        let (_, opt) = alternatives
            .iter()
            .find(|(n, _)| n.starts_with(&name))
            .expect("POLICY_CHOICE names an alternative");
        let m = fit_with_features(
            &train,
            &train_feats,
            &fz.embedder_id(),
            fz.second_opinion_info(),
            fz.intent_info(),
            opt,
        )
        .expect("fit");
        let text = serde_json::to_string(&m).expect("serialise");
        std::fs::write(&path, text + "\n").expect("write policy");
        eprintln!("wrote {} (train sha256 {})", path.display(), m.train.sha256);
        eprintln!("cv: {:?}", m.train.cv);
    }
}
