//! The bundled cases and their frozen train/test split (issue 15): every case has a split, the
//! old cases (the ones the removed regular-expression policy was written from) are all `train`,
//! the counts per language and split are pinned, and the committed split script agrees.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use cardinal_dataset::{load_case_dir, SafetyClass, Split};
use cardinal_kb::{KnowledgeBase, Lang};

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn bundled_cases_are_valid_and_the_split_is_frozen() {
    let data = root().join("data");
    let kb = KnowledgeBase::load(&data.join("kb")).unwrap();
    let (cases, diags) = load_case_dir(&data.join("cases")).unwrap();
    assert!(diags.is_empty(), "{diags}");
    let problems = cardinal_dataset::check(&kb, &cases);
    assert!(problems.is_empty(), "{problems}");
    let mut counts: BTreeMap<(Lang, Split), usize> = BTreeMap::new();
    for lc in &cases {
        let c = &lc.case;
        let split = c.split.unwrap_or_else(|| panic!("{} has no split", c.id));
        assert!(c.class.is_some(), "{} has no class", c.id);
        if c.id.contains("-s3-") {
            assert_eq!(
                split,
                Split::Holdout,
                "{}: the s3 batch is the holdout",
                c.id
            );
        } else if !c.id.contains("-s2-") {
            assert_eq!(
                split,
                Split::Train,
                "{}: an old case or a training batch (s4, s5) must never be test",
                c.id
            );
        }
        *counts.entry((c.lang, split)).or_default() += 1;
    }
    // Frozen: changing these numbers means the split moved.
    let want = [
        // Train grew by the s4 training batch (121 per language) on 2026-12-06; test and
        // holdout did not move. The s5 training batch (100 per language) on 2026-12-07.
        ((Lang::En, Split::Train), 426),
        ((Lang::En, Split::Test), 95),
        ((Lang::En, Split::Holdout), 150),
        ((Lang::Es419, Split::Train), 389),
        ((Lang::Es419, Split::Test), 102),
        ((Lang::Es419, Split::Holdout), 150),
        ((Lang::PtBr, Split::Train), 384),
        ((Lang::PtBr, Split::Test), 96),
        ((Lang::PtBr, Split::Holdout), 150),
    ];
    assert_eq!(counts, want.into_iter().collect::<BTreeMap<_, _>>());
    // Every refusal class and the emergency class has test cases in every language.
    for lang in Lang::ALL {
        for class in SafetyClass::ALL {
            let n = cases
                .iter()
                .filter(|l| {
                    l.case.lang == lang
                        && l.case.class == Some(*class)
                        && l.case.split == Some(Split::Test)
                })
                .count();
            assert!(n >= 6, "{lang} {class}: {n} test cases");
        }
    }
}

#[test]
fn the_split_script_reproduces_the_committed_split() {
    let out = Command::new("python3")
        .arg(root().join("scripts/safety_split.py"))
        .arg("--check")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
