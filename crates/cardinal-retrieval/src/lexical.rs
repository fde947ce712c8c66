//! Lexical retrieval: tantivy BM25 over chunks, one field per language with its own analyser
//! (lower-casing, stop words, Snowball stemming, accent folding; Portuguese -ões/-ães plurals
//! normalised to -ão first, which the Snowball stemmer leaves apart).

use std::mem;

use cardinal_kb::Lang;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};
use tantivy::{doc, Index, IndexReader, TantivyDocument};

use crate::error::{Result, RetrievalError};
use crate::IndexedChunk;

/// One lexical hit.
#[derive(Debug, Clone, PartialEq)]
pub struct LexicalHit {
    pub chunk_id: String,
    pub card_id: String,
    pub score: f32,
}

/// An in-memory BM25 index over the KB's chunks (rebuilt in milliseconds at this KB's size).
pub struct LexicalIndex {
    index: Index,
    reader: IndexReader,
    chunk_id: Field,
    card_id: Field,
    fields: [(Lang, Field); 3],
}

fn analyzer_name(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "cardinal_en",
        Lang::Es419 => "cardinal_es",
        Lang::PtBr => "cardinal_pt",
    }
}

/// The analyser of a language, exposed so tests can check what it does to words.
pub fn analyzer(lang: Lang) -> TextAnalyzer {
    let base = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser);
    match lang {
        Lang::En => base
            .filter(stop_words(Language::English))
            .filter(Stemmer::new(Language::English))
            .filter(AsciiFoldingFilter)
            .build(),
        Lang::Es419 => base
            .filter(stop_words(Language::Spanish))
            .filter(Stemmer::new(Language::Spanish))
            .filter(AsciiFoldingFilter)
            .build(),
        Lang::PtBr => base
            .filter(stop_words(Language::Portuguese))
            .filter(PtPluralFilter)
            .filter(Stemmer::new(Language::Portuguese))
            .filter(AsciiFoldingFilter)
            .build(),
    }
}

fn stop_words(lang: Language) -> StopWordFilter {
    StopWordFilter::new(lang).unwrap_or_else(|| StopWordFilter::remove(Vec::<String>::new()))
}

/// Analyse a text into its terms (for tests and explanations).
pub fn terms(lang: Lang, text: &str) -> Vec<String> {
    let mut a = analyzer(lang);
    let mut stream = a.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

impl LexicalIndex {
    /// Index chunks; each chunk goes into its language's field.
    pub fn build(chunks: &[IndexedChunk]) -> Result<Self> {
        let mut builder = Schema::builder();
        let chunk_id = builder.add_text_field("chunk_id", STRING | STORED);
        let card_id = builder.add_text_field("card_id", STRING | STORED);
        let mk = |lang: Lang| {
            TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(analyzer_name(lang))
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            )
        };
        let fields = [
            (Lang::En, builder.add_text_field("text_en", mk(Lang::En))),
            (
                Lang::Es419,
                builder.add_text_field("text_es", mk(Lang::Es419)),
            ),
            (
                Lang::PtBr,
                builder.add_text_field("text_pt", mk(Lang::PtBr)),
            ),
        ];
        let index = Index::create_in_ram(builder.build());
        for lang in Lang::ALL {
            index
                .tokenizers()
                .register(analyzer_name(lang), analyzer(lang));
        }
        let mut writer = index.writer_with_num_threads(1, 32_000_000)?;
        for c in chunks {
            let field = fields
                .iter()
                .find(|(l, _)| *l == c.lang)
                .map(|(_, f)| *f)
                .ok_or_else(|| RetrievalError::Internal("language field missing".into()))?;
            writer.add_document(doc!(
                chunk_id => c.chunk_id.clone(),
                card_id => c.card_id.clone(),
                field => c.text.clone(),
            ))?;
        }
        writer.commit()?;
        let reader = index.reader()?;
        Ok(LexicalIndex {
            index,
            reader,
            chunk_id,
            card_id,
            fields,
        })
    }

    /// BM25 search of one language's chunks with that language's analyser.
    pub fn search(&self, query: &str, lang: Lang, n: usize) -> Result<Vec<LexicalHit>> {
        let Some(field) = self
            .fields
            .iter()
            .find(|(l, _)| *l == lang)
            .map(|(_, f)| *f)
        else {
            return Ok(Vec::new());
        };
        let parser = QueryParser::for_index(&self.index, vec![field]);
        // Lenient: user text is not query syntax; stray quotes or colons must not fail.
        let (q, _errors) = parser.parse_query_lenient(&escape(query));
        let searcher = self.reader.searcher();
        let top = searcher.search(&q, &TopDocs::with_limit(n.max(1)).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr)?;
            let get = |f: Field| {
                d.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            hits.push(LexicalHit {
                chunk_id: get(self.chunk_id),
                card_id: get(self.card_id),
                score,
            });
        }
        Ok(hits)
    }
}

/// Replace query-syntax characters by spaces so every word is a plain term.
fn escape(q: &str) -> String {
    q.chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect()
}

/// Portuguese plural normalisation: -ões, -ães, -ãos → -ão (conexões → conexão).
#[derive(Clone)]
pub struct PtPluralFilter;

impl TokenFilter for PtPluralFilter {
    type Tokenizer<T: Tokenizer> = PtPluralWrapper<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> PtPluralWrapper<T> {
        PtPluralWrapper { tokenizer }
    }
}

#[derive(Clone)]
pub struct PtPluralWrapper<T> {
    tokenizer: T,
}

impl<T: Tokenizer> Tokenizer for PtPluralWrapper<T> {
    type TokenStream<'a> = PtPluralStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        PtPluralStream {
            tail: self.tokenizer.token_stream(text),
        }
    }
}

pub struct PtPluralStream<T> {
    tail: T,
}

impl<T: TokenStream> TokenStream for PtPluralStream<T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let text = &mut self.tail.token_mut().text;
        for suffix in ["ões", "ães", "ãos"] {
            if let Some(stem) = text.strip_suffix(suffix) {
                let mut s = String::with_capacity(stem.len() + 3);
                s.push_str(stem);
                s.push_str("ão");
                let _ = mem::replace(text, s);
                break;
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stemming_and_folding_per_language() {
        assert_eq!(
            terms(Lang::En, "Missed doses"),
            terms(Lang::En, "missing dose")
        );
        assert_eq!(
            terms(Lang::Es419, "medicación"),
            terms(Lang::Es419, "medicaciones")
        );
        assert_eq!(terms(Lang::Es419, "Vacunas"), terms(Lang::Es419, "vacuna"));
        assert_eq!(terms(Lang::PtBr, "conexões"), terms(Lang::PtBr, "conexão"));
        assert_eq!(terms(Lang::PtBr, "injeções"), terms(Lang::PtBr, "injeção"));
        assert_eq!(terms(Lang::PtBr, "remédios"), terms(Lang::PtBr, "remedio"));
        // Stop words vanish.
        assert!(terms(Lang::Es419, "de la que").is_empty());
        // Accents folded after stemming: no non-ASCII term survives.
        assert!(terms(Lang::PtBr, "refrigeração à noite")
            .iter()
            .all(|t| t.is_ascii()));
    }

    fn chunk(id: &str, lang: Lang, text: &str) -> IndexedChunk {
        IndexedChunk {
            chunk_id: format!("{id}#0"),
            card_id: id.to_string(),
            lang,
            topic: id.split('.').next().unwrap_or(id).to_string(),
            text: text.to_string(),
        }
    }

    #[test]
    fn bm25_ranks_the_matching_chunk_first_within_its_language() {
        let chunks = vec![
            chunk(
                "insulin.en",
                Lang::En,
                "Keep unopened insulin pens in the refrigerator.",
            ),
            chunk(
                "refills.en",
                Lang::En,
                "Request refills three business days ahead.",
            ),
            chunk(
                "insulina.es-419",
                Lang::Es419,
                "Guarde la insulina en el refrigerador.",
            ),
        ];
        let idx = LexicalIndex::build(&chunks).unwrap();
        let hits = idx
            .search("where do I keep my insulin?", Lang::En, 10)
            .unwrap();
        assert_eq!(hits[0].card_id, "insulin.en");
        assert!(hits.iter().all(|h| h.card_id.ends_with(".en")));
        let es = idx
            .search("¿Dónde guardo la insulina?", Lang::Es419, 10)
            .unwrap();
        assert_eq!(es.len(), 1);
        assert_eq!(es[0].card_id, "insulina.es-419");
        // Query syntax in user text is harmless.
        assert!(idx.search("insulin: \"pens\" AND (", Lang::En, 5).is_ok());
    }
}
