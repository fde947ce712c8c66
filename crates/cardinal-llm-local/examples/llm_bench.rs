//! Prompt-processing and decode speed of the local runtime, and what prefix reuse saves.
//!
//! ```sh
//! cargo run --release -p cardinal-llm-local --example llm_bench -- \
//!     [--model PATH] [--threads N] [--batch N] [--runs N] [--gen N] [--write-prompt FILE]
//! ```
//!
//! The default model is the installed `qwen2.5-coder-0.5b`. `--write-prompt` saves the exact
//! rendered prompt so `crates/cardinal-llm-local/tools/llama_cpp_peer_bench.py` can run llama.cpp itself on the same
//! tokens (see that script for the comparison).

use std::path::PathBuf;

use cardinal_llm::{GenParams, Message};
use cardinal_llm_local::{LocalModel, LocalOptions};

const CARD: &str = "Redbird Clinics runs a nurse advice line. The line is open every day from 7 am to 10 pm. \
Outside those hours, patients should call the after-hours number 555-0142, which connects to an on-call nurse. \
For a life-threatening emergency, call the local emergency number immediately; do not use the advice line. \
Prescription refills are requested through the patient portal at least five business days before the medicine runs out. \
The pharmacy team reviews refill requests on weekdays only, and a refill for a controlled medicine needs a visit in the last six months. \
If a refill is urgent because the patient has two days or less of medicine left, the patient should call the clinic and say it is urgent. \
Appointments can be booked online, by phone, or at the front desk. A new-patient visit lasts 40 minutes and a follow-up visit lasts 20 minutes. \
Patients who arrive more than 15 minutes late may be asked to reschedule. Cancellations should be made at least 24 hours in advance. \
Lab results appear in the portal within three business days; a nurse calls the patient if a result needs action. \
Patients must never double a missed dose to catch up; they should take the next dose at the usual time or ask the pharmacist. \
Patients should not stop a prescribed medicine without talking to their care team. The care team can explain side effects and alternatives. \
Vaccination clinics run on Saturdays from 9 am to 1 pm; no appointment is needed for flu shots. \
Interpreters for Spanish and Portuguese are available at no cost; patients can ask for one when booking. \
Parking is free for the first two hours in the garage on Elm Street; bring the ticket to the front desk for validation. \
The clinic does not give diagnoses over the phone or by portal message; a visit is needed for a diagnosis. \
Billing questions go to the billing office at 555-0177, open weekdays from 9 am to 5 pm. \
Patients can update their address and insurance in the portal under Profile. \
Medical records requests take up to ten business days and are free for the patient's own care.";

const SYSTEM: &str =
    "You answer questions about Redbird Clinics using only the context in the user's \
message. Answer in two or three sentences. If the context does not say, say that you do not know.";

fn messages(question: &str) -> Vec<Message> {
    vec![
        Message::system(format!("{SYSTEM}\n\nContext:\n{CARD}")),
        Message::user(question),
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut model_path: Option<PathBuf> = None;
    let mut threads: Option<usize> = None;
    let mut runs = 3usize;
    let mut gen = 60u32;
    let mut write_prompt: Option<PathBuf> = None;
    let mut batch = LocalOptions::default().batch_size;
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--model" => model_path = Some(val().into()),
            "--threads" => threads = Some(val().parse().expect("--threads N")),
            "--runs" => runs = val().parse().expect("--runs N"),
            "--gen" => gen = val().parse().expect("--gen N"),
            "--write-prompt" => write_prompt = Some(val().into()),
            "--batch" => batch = val().parse().expect("--batch N"),
            other => panic!("unknown argument {other}"),
        }
    }
    let path = model_path.unwrap_or_else(|| {
        cardinal_models::model_root()
            .join("qwen2.5-coder-0.5b")
            .join("model.gguf")
    });

    let t = std::time::Instant::now();
    let load = |prefix_cache| {
        LocalModel::load(
            &path,
            LocalOptions {
                threads,
                prefix_cache,
                batch_size: batch,
                ..LocalOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let cold = load(false);
    println!(
        "model {} loaded in {:.2}s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    println!("threads {}, batch {batch}", cold.threads());

    // Asks for a long answer so that decoding runs to --gen tokens.
    let q0 = "List every fact of the context as a numbered list, one line each.";
    let q1 = "My refill is urgent and I only have one day of pills left. What should I do?";
    let q2 = "Can I get a flu shot without an appointment, and when?";
    let m0 = messages(q0);
    if let Some(out) = &write_prompt {
        std::fs::write(out, cold.render_prompt(&m0).unwrap()).unwrap();
        println!("prompt written to {}", out.display());
    }
    let params = GenParams {
        max_tokens: gen,
        stop: vec![],
        ..GenParams::default()
    };
    let mut pp = Vec::new();
    let mut tg = Vec::new();
    for run in 0..runs {
        let (c, s) = cold.complete_with_stats(&m0, &params).unwrap();
        println!(
            "run {run}: prompt {} tok in {:.2}s = {:.1} tok/s; decode {} tok in {:.2}s = {:.1} tok/s ({:?})",
            s.prompt_tokens,
            s.prompt_seconds,
            s.prompt_tokens_per_second(),
            s.generated_tokens,
            s.decode_seconds,
            s.decode_tokens_per_second(),
            c.finish_reason
        );
        if run == 0 {
            println!("answer: {:?}", c.text);
        }
        pp.push(s.prompt_tokens_per_second());
        tg.push(s.decode_tokens_per_second());
    }
    println!(
        "MEDIAN prompt {:.1} tok/s, decode {:.1} tok/s",
        median(pp),
        median(tg)
    );
    drop(cold);

    // Prefix reuse: the same long system prompt with alternating questions.
    let short = GenParams {
        max_tokens: 8,
        ..GenParams::default()
    };
    let mut answers = Vec::new();
    for prefix_cache in [false, true] {
        let m = load(prefix_cache);
        let mut total = 0.0;
        let mut reused = 0;
        let mut texts = Vec::new();
        for i in 0..4 {
            let msgs = messages(if i % 2 == 0 { q1 } else { q2 });
            let t = std::time::Instant::now();
            let (c, s) = m.complete_with_stats(&msgs, &short).unwrap();
            total += t.elapsed().as_secs_f64();
            reused += s.reused_tokens;
            texts.push(c.text);
        }
        println!(
            "prefix_cache={prefix_cache}: 4 calls (8 tokens each) in {total:.2}s, {reused} prompt tokens reused"
        );
        answers.push(texts);
    }
    println!(
        "answers with and without prefix reuse identical: {}",
        answers[0] == answers[1]
    );
}
