//! The API key comes from the environment variable the config names. Alone in its own test
//! binary, because it sets an environment variable.

use std::time::Duration;

use cardinal_llm::testing::{ScriptedResponse, ScriptedServer};
use cardinal_llm::{ChatModel, GenParams, Message, OpenAiClient, OpenAiConfig};

#[test]
fn the_key_from_the_named_variable_becomes_a_bearer_header(
) -> Result<(), Box<dyn std::error::Error>> {
    const VAR: &str = "CARDINAL_LLM_TEST_API_KEY";
    std::env::set_var(VAR, "sk-test-123");
    let (server, base_url) = ScriptedServer::start(vec![
        ScriptedResponse::completion("authorised"),
        ScriptedResponse::completion("anonymous"),
    ])?;

    let mut cfg = OpenAiConfig::new(&base_url, "m");
    cfg.api_key_env = VAR.into();
    cfg.proxy_from_env = false;
    cfg.request_timeout = Duration::from_secs(3);
    let with_key = OpenAiClient::new(cfg.clone())?;
    assert!(with_key.has_api_key());
    assert!(
        !format!("{with_key:?}").contains("sk-test-123"),
        "Debug must not show the key"
    );
    let out = with_key.complete(&[Message::user("hi")], &GenParams::default())?;
    assert_eq!(out.text, "authorised");

    cfg.api_key_env = "CARDINAL_LLM_TEST_API_KEY_UNSET".into();
    let without_key = OpenAiClient::new(cfg)?;
    assert!(!without_key.has_api_key());
    let out = without_key.complete(&[Message::user("hi")], &GenParams::default())?;
    assert_eq!(out.text, "anonymous");

    let requests = server.finish();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("Authorization"),
        Some("Bearer sk-test-123")
    );
    assert_eq!(requests[1].header("Authorization"), None);
    std::env::remove_var(VAR);
    Ok(())
}
