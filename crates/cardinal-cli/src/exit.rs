//! The exit-code contract for errors: 2 usage or input, 3 runtime failure. Typed errors of the
//! run library carry their class; typed errors of the lower crates are classified here; any
//! other error is taken as input (a message the user can act on).

use cardinal_harness::error::{llm_class, model_class, retrieval_class};
use cardinal_harness::{ErrorClass, HarnessError};

/// The exit code of an error.
pub fn code(e: &anyhow::Error) -> u8 {
    match class(e) {
        ErrorClass::Input => 2,
        ErrorClass::Runtime => 3,
    }
}

/// The class of the first typed error in the chain.
pub fn class(e: &anyhow::Error) -> ErrorClass {
    for cause in e.chain() {
        if let Some(h) = cause.downcast_ref::<HarnessError>() {
            return h.class();
        }
        if let Some(m) = cause.downcast_ref::<cardinal_models::ModelError>() {
            return model_class(m);
        }
        if let Some(l) = cause.downcast_ref::<cardinal_llm::LlmError>() {
            return llm_class(l);
        }
        if let Some(r) = cause.downcast_ref::<cardinal_retrieval::RetrievalError>() {
            return retrieval_class(r);
        }
        if cause.downcast_ref::<cardinal_embed::EmbedError>().is_some() {
            return ErrorClass::Runtime;
        }
    }
    ErrorClass::Input
}

/// The error and its causes on one line, each said once: a cause whose text the message
/// already contains (thiserror's `{source}` formats) is not repeated.
pub fn message(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let s = cause.to_string();
        if !msg.contains(&s) {
            msg.push_str(": ");
            msg.push_str(&s);
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_contract() {
        let input = anyhow::Error::new(HarnessError::Input("bad flag".into()));
        assert_eq!(code(&input), 2);
        let pull = anyhow::Error::new(cardinal_models::ModelError::Download {
            command: "pip download x".into(),
            message: "no network".into(),
        });
        assert_eq!(code(&pull), 3);
        let unknown = anyhow::Error::new(cardinal_models::ModelError::Unknown(
            "nope".into(),
            "e5-small".into(),
        ));
        assert_eq!(code(&unknown), 2);
        let store = anyhow::Error::new(cardinal_retrieval::RetrievalError::Store(
            "connection refused".into(),
        ))
        .context("connecting to Chroma");
        assert_eq!(code(&store), 3);
    }

    #[test]
    fn causes_are_said_once() {
        let e = anyhow::Error::new(HarnessError::Input("x is wrong".into())).context("loading y");
        assert_eq!(message(&e), "loading y: x is wrong");
        let inner = HarnessError::Input("disk full".into()).context("writing z");
        let e = anyhow::Error::new(inner);
        // The context variant prints its source itself; the chain does not repeat it.
        assert_eq!(message(&e), "writing z: disk full");
    }
}
