//! The on-disk response cache: a warm re-run makes zero model calls; any change of model,
//! parameters or messages is a miss; a corrupt entry is a miss and is repaired; `Off` bypasses.

use std::path::Path;
use std::sync::Arc;

use cardinal_llm::cache::cache_key;
use cardinal_llm::testing::FakeModel;
use cardinal_llm::{CacheMode, CacheStats, CachedModel, ChatModel, GenParams, LlmError, Message};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn ask(q: &str) -> Vec<Message> {
    vec![Message::system("Answer from the cards."), Message::user(q)]
}

fn cached(dir: &Path, mode: CacheMode) -> CachedModel<FakeModel> {
    CachedModel::new(FakeModel::new("fake:model-a"), dir, mode).expect("cache dir")
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_warm_rerun_makes_zero_model_calls() -> TestResult {
    let dir = tempfile::tempdir()?;
    let questions = ["dose?", "dosis?", "dose esquecida?"];
    let params = GenParams::default();

    let cold = cached(dir.path(), CacheMode::ReadWrite);
    let first: Vec<_> = questions
        .iter()
        .map(|q| cold.complete(&ask(q), &params))
        .collect::<Result<_, _>>()?;
    assert_eq!(cold.inner().calls(), 3);
    assert_eq!(
        cold.stats(),
        CacheStats {
            hits: 0,
            misses: 3,
            corrupt: 0,
            model_calls: 3,
            writes: 3,
            write_errors: 0
        }
    );

    // A new process: a fresh wrapper and a fresh model over the same directory.
    let warm = cached(dir.path(), CacheMode::ReadWrite);
    let second: Vec<_> = questions
        .iter()
        .map(|q| warm.complete(&ask(q), &params))
        .collect::<Result<_, _>>()?;
    assert_eq!(
        warm.inner().calls(),
        0,
        "a warm re-run must not call the model"
    );
    assert_eq!(warm.stats().model_calls, 0);
    assert_eq!(warm.stats().hits, 3);
    assert_eq!(first, second);
    Ok(())
}

#[test]
fn any_change_of_model_parameters_or_messages_is_a_miss() -> TestResult {
    let dir = tempfile::tempdir()?;
    let base = GenParams::default();
    let c = cached(dir.path(), CacheMode::ReadWrite);
    c.complete(&ask("dose?"), &base)?;
    assert_eq!(c.inner().calls(), 1);

    let variants = [
        GenParams {
            temperature: 0.5,
            ..base.clone()
        },
        GenParams {
            max_tokens: base.max_tokens + 1,
            ..base.clone()
        },
        GenParams {
            seed: base.seed + 1,
            ..base.clone()
        },
        GenParams {
            stop: vec!["\n".into()],
            ..base.clone()
        },
    ];
    for (i, p) in variants.iter().enumerate() {
        c.complete(&ask("dose?"), p)?;
        assert_eq!(c.inner().calls(), 2 + i, "{p:?} must miss");
    }
    c.complete(&ask("dose ?"), &base)?;
    c.complete(&[Message::user("dose?")], &base)?;
    assert_eq!(c.inner().calls(), 7, "changed messages must miss");
    assert_eq!(c.stats().hits, 0);

    // Another model id over the same directory misses too.
    let other = CachedModel::new(
        FakeModel::new("fake:model-b"),
        dir.path(),
        CacheMode::ReadWrite,
    )?;
    other.complete(&ask("dose?"), &base)?;
    assert_eq!(other.inner().calls(), 1);

    // And the unchanged request still hits.
    c.complete(&ask("dose?"), &base)?;
    assert_eq!(c.inner().calls(), 7);
    assert_eq!(c.stats().hits, 1);
    Ok(())
}

#[test]
fn a_corrupt_entry_is_a_miss_and_is_repaired() -> TestResult {
    let dir = tempfile::tempdir()?;
    let params = GenParams::default();
    let msgs = ask("dose?");
    let c = cached(dir.path(), CacheMode::ReadWrite);
    let original = c.complete(&msgs, &params)?;
    let path = c.entry_path(&msgs, &params)?;
    assert!(path.is_file());

    for garbage in [
        &b""[..],
        b"{\"request\": ",
        b"not json at all",
        b"{\"request\":{},\"completion\":{}}",
    ] {
        std::fs::write(&path, garbage)?;
        let before = c.stats();
        let again = c.complete(&msgs, &params)?;
        let after = c.stats();
        assert_eq!(after.corrupt, before.corrupt + 1);
        assert_eq!(after.model_calls, before.model_calls + 1);
        assert_ne!(
            again, original,
            "answered by the model, not the broken file"
        );
        // Repaired: the next call is a hit on what was just written.
        let hit = c.complete(&msgs, &params)?;
        assert_eq!(hit, again);
        assert_eq!(c.stats().hits, after.hits + 1);
    }

    // A well-formed entry of another request at this path is foreign, hence corrupt.
    let other_path = c.entry_path(&ask("other"), &params)?;
    c.complete(&ask("other"), &params)?;
    std::fs::copy(&other_path, &path)?;
    let before = c.stats();
    let answer = c.complete(&msgs, &params)?;
    assert!(answer.text.ends_with("dose?"), "{}", answer.text);
    assert_eq!(c.stats().corrupt, before.corrupt + 1);
    Ok(())
}

#[test]
fn off_mode_bypasses_the_cache() -> TestResult {
    let parent = tempfile::tempdir()?;
    let dir = parent.path().join("cache");
    let c = cached(&dir, CacheMode::Off);
    c.complete(&ask("dose?"), &GenParams::default())?;
    c.complete(&ask("dose?"), &GenParams::default())?;
    assert_eq!(c.inner().calls(), 2);
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.writes, s.model_calls), (0, 0, 0, 2));
    assert!(!dir.exists(), "Off must not even create the directory");
    assert_eq!(CacheMode::from_no_cache(true), CacheMode::Off);
    assert_eq!(CacheMode::from_no_cache(false), CacheMode::ReadWrite);
    Ok(())
}

#[test]
fn read_only_never_writes_and_refresh_never_reads() -> TestResult {
    let dir = tempfile::tempdir()?;
    let p = GenParams::default();
    let ro = cached(dir.path(), CacheMode::ReadOnly);
    ro.complete(&ask("dose?"), &p)?;
    assert!(files(dir.path()).is_empty());
    assert_eq!(ro.stats().misses, 1);

    let refresh = cached(dir.path(), CacheMode::Refresh);
    let a = refresh.complete(&ask("dose?"), &p)?;
    let b = refresh.complete(&ask("dose?"), &p)?;
    assert_eq!(refresh.inner().calls(), 2);
    assert_ne!(a, b);
    assert_eq!(refresh.stats().writes, 2);

    let ro = cached(dir.path(), CacheMode::ReadOnly);
    assert_eq!(
        ro.complete(&ask("dose?"), &p)?,
        b,
        "the latest refresh is served"
    );
    assert_eq!(ro.inner().calls(), 0);
    Ok(())
}

#[test]
fn failed_calls_are_not_cached() -> TestResult {
    let dir = tempfile::tempdir()?;
    let c = cached(dir.path(), CacheMode::ReadWrite);
    c.inner().set_failing(true);
    let err = c.complete(&ask("dose?"), &GenParams::default());
    assert!(matches!(err, Err(LlmError::Transport { .. })), "{err:?}");
    assert!(files(dir.path()).is_empty());
    c.inner().set_failing(false);
    c.complete(&ask("dose?"), &GenParams::default())?;
    assert_eq!(c.inner().calls(), 2);
    assert_eq!(c.stats().writes, 1);
    Ok(())
}

#[test]
fn entries_are_sharded_json_files_without_leftovers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let p = GenParams::default();
    let c = cached(dir.path(), CacheMode::ReadWrite);
    c.complete(&ask("dose?"), &p)?;
    let key = c.key(&ask("dose?"), &p)?;
    assert_eq!(key.len(), 64);
    assert!(key
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let expected = dir.path().join(&key[..2]).join(format!("{key}.json"));
    assert_eq!(
        files(dir.path()),
        vec![expected.clone()],
        "no temporary files left"
    );
    let entry: serde_json::Value = serde_json::from_slice(&std::fs::read(&expected)?)?;
    assert_eq!(entry["request"]["model"], "fake:model-a");
    assert_eq!(entry["completion"]["text"], "fake:model-a answer #1: dose?");
    Ok(())
}

#[test]
fn keys_are_canonical_and_stable() -> TestResult {
    let p = GenParams::default();
    let m = ask("dose?");
    let k = cache_key("fake:model-a", &m, &p)?;
    assert_eq!(k, cache_key("fake:model-a", &m, &p)?);
    let neg_zero = GenParams {
        temperature: -0.0,
        ..p.clone()
    };
    assert_eq!(k, cache_key("fake:model-a", &m, &neg_zero)?, "-0.0 is 0.0");
    // Pinned: sha256 of the canonical key material
    // {"format":1,"model":"fake:model-a","params":{"temperature":0.0,"max_tokens":256,"seed":42,
    //  "stop":[]},"messages":[{"role":"system","content":"Answer from the cards."},
    //  {"role":"user","content":"dose?"}]} (no spaces). A change here invalidates every cache:
    // bump CACHE_FORMAT deliberately instead.
    assert_eq!(
        k,
        "b1fbaf2362d3e5364be11989207ef5ea4829ba9626fa8ba30861b99800b97c61"
    );
    let nan = GenParams {
        temperature: f32::NAN,
        ..p
    };
    assert!(matches!(
        cache_key("fake:model-a", &m, &nan),
        Err(LlmError::Config(_))
    ));
    Ok(())
}

#[test]
fn one_cache_is_shared_across_threads_as_a_dyn_model() -> TestResult {
    let dir = tempfile::tempdir()?;
    let fake = Arc::new(FakeModel::new("fake:shared"));
    let inner: Arc<dyn ChatModel> = fake.clone();
    let shared: Arc<dyn ChatModel> =
        Arc::new(CachedModel::new(inner, dir.path(), CacheMode::ReadWrite)?);
    assert_eq!(shared.id(), "fake:shared");
    shared.complete(&ask("warm"), &GenParams::default())?;
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let m = Arc::clone(&shared);
            std::thread::spawn(move || m.complete(&ask("warm"), &GenParams::default()))
        })
        .collect();
    for h in handles {
        let out = h.join().map_err(|_| "thread panicked")??;
        assert_eq!(out.text, "fake:shared answer #1: warm");
    }
    assert_eq!(
        fake.calls(),
        1,
        "agent and judge threads share one warm cache"
    );
    Ok(())
}
