//! The page templates (embedded at compile time) and their environment: HTML auto-escaping on
//! every template, strict undefined values (a template typo is an error, not an empty string).

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde::Serialize;

use crate::error::Result;

const TEMPLATES: [(&str, &str); 4] = [
    ("base.html", include_str!("../templates/base.html")),
    ("macros.html", include_str!("../templates/macros.html")),
    ("sweep.html", include_str!("../templates/sweep.html")),
    (
        "calibration.html",
        include_str!("../templates/calibration.html"),
    ),
];

fn environment() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?,
    );
    for (name, source) in TEMPLATES {
        env.add_template(name, source)?;
    }
    Ok(env)
}

/// Renders the page template `name` with `ctx`.
pub(crate) fn render<S: Serialize>(name: &str, ctx: &S) -> Result<String> {
    let env = environment()?;
    let template = env.get_template(name)?;
    Ok(template.render(Serde(ctx))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        let env = environment().unwrap();
        for (name, _) in TEMPLATES {
            env.get_template(name).unwrap();
        }
    }
}
