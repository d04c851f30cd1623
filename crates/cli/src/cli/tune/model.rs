//! `tune --model`: the GEMM shapes of a Hugging Face model's linear layers.
//!
//! Owns: reading a model's `config.json` (the fields named below, nothing
//! else), and turning them into the `n×k` weight shapes of its linear layers
//! as one tensor-parallel rank sees them. Never: tunes, prints, or guesses a
//! field the file does not have (beyond Hugging Face's own documented
//! defaults, named below).
//!
//! The layers, for `--tp T` (Megatron-style splits, as vLLM, SGLang and
//! TensorRT-LLM shard them): column-parallel layers split their output `n`
//! by `T`, row-parallel layers their input `k`.
//!
//! | layer | k (input) | n (output) |
//! | --- | --- | --- |
//! | `qkv` (column) | hidden | (heads + 2·kv_heads)·head_dim / T |
//! | `o` (row) | heads·head_dim / T | hidden |
//! | `gate_up` (column, fused) | hidden | 2·intermediate / T |
//! | `down` (row) | intermediate / T | hidden |
//! | `lm_head` (column, vocab-parallel) | hidden | ⌈vocab / T⌉ |
//!
//! A mixture-of-experts model (`num_local_experts`, `n_routed_experts` or
//! `num_experts`) has `expert_gate_up`/`expert_down` with
//! `moe_intermediate_size` (else `intermediate_size`) instead of the dense
//! MLP; a shared expert (`shared_expert_intermediate_size`) and leading
//! dense layers (`first_k_dense_replace` > 0) add their own MLP shapes.
//! With fewer KV heads than ranks, each rank keeps one (replicated), as
//! vLLM does. Missing required fields, fields of the wrong type, splits
//! that do not divide, and attention this table does not describe
//! (DeepSeek's MLA, `kv_lora_rank`) are errors naming the field.
//!
//! Defaults from Hugging Face's configuration classes: `num_key_value_heads`
//! = `num_attention_heads` (no grouped-query attention) and `head_dim` =
//! `hidden_size / num_attention_heads`. A multimodal config's text model
//! (`text_config`) is read when the top level has no `hidden_size`.

use anyhow::{bail, Context};
use serde_json::{Map, Value};
use std::path::Path;

/// One linear layer's weight shape on one rank.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layer {
    /// `qkv`, `o`, `gate_up`, `down`, `lm_head`, `expert_gate_up`, ….
    pub name: String,
    /// Input features (the GEMM's k).
    pub k: u64,
    /// Output features (the GEMM's n).
    pub n: u64,
}

/// A model's linear layers as one tensor-parallel rank sees them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelShapes {
    /// The config's `architectures[0]` or `model_type`, or the file name.
    pub name: String,
    /// The tensor-parallel degree the shapes are split by.
    pub tp: u32,
    /// Every layer, in the model's order.
    pub layers: Vec<Layer>,
}

impl ModelShapes {
    /// Reads `path` (a Hugging Face `config.json`) and splits by `tp`.
    pub fn from_file(path: &Path, tp: u32) -> anyhow::Result<ModelShapes> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the model config {}", path.display()))?;
        let doc: Value = serde_json::from_str(&text).with_context(|| {
            format!(
                "the model config {} is not JSON; give a Hugging Face config.json",
                path.display()
            )
        })?;
        let fallback = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        ModelShapes::from_config(&doc, tp, fallback.as_deref().unwrap_or("model"))
            .with_context(|| format!("the model config {}", path.display()))
    }

    /// The shapes of the config `doc`, split by `tp`.
    pub fn from_config(doc: &Value, tp: u32, fallback_name: &str) -> anyhow::Result<ModelShapes> {
        let Some(top) = doc.as_object() else {
            bail!("is not a JSON object; give a Hugging Face config.json");
        };
        if tp == 0 {
            bail!("--tp 0 has no ranks; give a tensor-parallel degree of at least 1");
        }
        let cfg = match top.get("text_config").and_then(Value::as_object) {
            Some(text) if !top.contains_key("hidden_size") => text,
            _ => top,
        };
        let name = top
            .get("architectures")
            .and_then(|a| a.get(0))
            .or_else(|| cfg.get("model_type"))
            .and_then(Value::as_str)
            .unwrap_or(fallback_name)
            .to_string();
        if cfg.get("kv_lora_rank").is_some_and(|v| !v.is_null()) {
            bail!(
                "has kv_lora_rank: multi-head latent attention (DeepSeek's MLA) has other \
                 projection shapes than q/k/v; tune --model knows standard and grouped-query attention"
            );
        }
        let f = Fields(cfg);
        let missing: Vec<&str> = ["hidden_size", "num_attention_heads", "vocab_size"]
            .into_iter()
            .filter(|k| !cfg.contains_key(*k))
            .collect();
        if !missing.is_empty() {
            bail!(
                "lacks {}; tune --model needs hidden_size, num_attention_heads, vocab_size and \
                 intermediate_size (or moe_intermediate_size) from a Hugging Face config.json",
                missing.join(", ")
            );
        }
        let hidden = f.required("hidden_size")?;
        let heads = f.required("num_attention_heads")?;
        let kv_heads = f.optional("num_key_value_heads")?.unwrap_or(heads);
        let head_dim = match f.optional("head_dim")? {
            Some(d) => d,
            None if hidden % heads == 0 => hidden / heads,
            None => bail!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {heads} and there \
                 is no head_dim; add head_dim"
            ),
        };
        let vocab = f.required("vocab_size")?;
        let t = u64::from(tp);
        let split = |what: &str, v: u64| -> anyhow::Result<u64> {
            if v % t != 0 {
                bail!("{what} {v} does not split over --tp {tp}; choose a --tp that divides it");
            }
            Ok(v / t)
        };
        let heads_here = split("num_attention_heads", heads)?;
        let kv_here = if kv_heads < t { 1 } else { split("num_key_value_heads", kv_heads)? };
        let mut layers = vec![
            layer("qkv", hidden, (heads_here + 2 * kv_here) * head_dim),
            layer("o", heads_here * head_dim, hidden),
        ];
        let experts = ["num_local_experts", "n_routed_experts", "num_experts"]
            .into_iter()
            .map(|k| f.optional(k))
            .collect::<anyhow::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .find(|&e| e > 0);
        let mut mlp = |prefix: &str, field: &str, inter: u64| -> anyhow::Result<()> {
            let here = split(field, inter)?;
            layers.push(layer(&format!("{prefix}gate_up"), hidden, 2 * here));
            layers.push(layer(&format!("{prefix}down"), here, hidden));
            Ok(())
        };
        match experts {
            None => mlp("", "intermediate_size", f.required("intermediate_size")?)?,
            Some(_) => {
                if f.optional("first_k_dense_replace")?.is_some_and(|n| n > 0) {
                    mlp("", "intermediate_size", f.required("intermediate_size")?)?;
                }
                let (field, inter) = match f.optional("moe_intermediate_size")? {
                    Some(v) => ("moe_intermediate_size", v),
                    None => ("intermediate_size", f.required("intermediate_size")?),
                };
                mlp("expert_", field, inter)?;
                let shared = "shared_expert_intermediate_size";
                if let Some(inter) = f.optional(shared)?.filter(|&v| v > 0) {
                    mlp("shared_expert_", shared, inter)?;
                }
            }
        }
        layers.push(layer("lm_head", hidden, vocab.div_ceil(t)));
        Ok(ModelShapes { name, tp, layers })
    }

    /// Checks that every layer's weights fit the built-in kernels' memory
    /// bound: each rank holds one f32 `k×n` weight (and its inputs) at a time.
    pub fn check_fits(&self, limit_bytes: u64) -> anyhow::Result<()> {
        for l in &self.layers {
            let bytes = l.k.saturating_mul(l.n).saturating_mul(4);
            if bytes > limit_bytes {
                bail!(
                    "layer {} ({}×{}) needs {:.1} GiB of f32 weights per rank, more than the \
                     built-in kernels tune in memory ({} GiB); split it with a larger --tp",
                    l.name,
                    l.k,
                    l.n,
                    bytes as f64 / (1u64 << 30) as f64,
                    limit_bytes >> 30
                );
            }
        }
        Ok(())
    }

    /// The distinct `(n, k)` shapes, in first-seen order, each with the
    /// names of the layers that have it.
    pub fn distinct(&self) -> Vec<((u64, u64), Vec<&str>)> {
        let mut out: Vec<((u64, u64), Vec<&str>)> = Vec::new();
        for l in &self.layers {
            match out.iter_mut().find(|(s, _)| *s == (l.n, l.k)) {
                Some((_, names)) => names.push(&l.name),
                None => out.push(((l.n, l.k), vec![&l.name])),
            }
        }
        out
    }

    /// One line naming the model and its layers' shapes (`k→n`).
    pub fn describe(&self) -> String {
        let layers: Vec<String> =
            self.layers.iter().map(|l| format!("{} {}→{}", l.name, l.k, l.n)).collect();
        format!("model {} (tp {}): {}", self.name, self.tp, layers.join(", "))
    }
}

fn layer(name: &str, k: u64, n: u64) -> Layer {
    Layer { name: name.to_string(), k, n }
}

/// The config's fields, read as positive integers.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn optional(&self, key: &str) -> anyhow::Result<Option<u64>> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(0) => bail!("{key} is 0; a layer needs at least one feature"),
                Some(n) => Ok(Some(n)),
                None => bail!("{key} is {v}, not a positive whole number"),
            },
        }
    }

    fn required(&self, key: &str) -> anyhow::Result<u64> {
        self.optional(key)?.with_context(|| format!("lacks {key}, which tune --model needs"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shapes(doc: Value, tp: u32) -> Vec<(String, u64, u64)> {
        let m = ModelShapes::from_config(&doc, tp, "m").unwrap();
        m.layers.into_iter().map(|l| (l.name, l.k, l.n)).collect()
    }

    fn owned(v: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
        v.iter().map(|&(n, k, o)| (n.to_string(), k, o)).collect()
    }

    #[test]
    fn a_dense_grouped_query_model_split_over_two_ranks() {
        // Qwen2.5-0.5B's fields.
        let doc = json!({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896,
            "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
            "vocab_size": 151936});
        assert_eq!(
            shapes(doc.clone(), 1),
            owned(&[
                ("qkv", 896, 1152),
                ("o", 896, 896),
                ("gate_up", 896, 9728),
                ("down", 4864, 896),
                ("lm_head", 896, 151936)
            ])
        );
        assert_eq!(
            shapes(doc, 2),
            owned(&[
                ("qkv", 896, 576),
                ("o", 448, 896),
                ("gate_up", 896, 4864),
                ("down", 2432, 896),
                ("lm_head", 896, 75968)
            ])
        );
    }

    #[test]
    fn kv_heads_fewer_than_ranks_are_replicated_and_head_dim_is_read() {
        let doc = json!({"hidden_size": 1024, "intermediate_size": 2048,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "vocab_size": 1001});
        // 8 heads / 4 = 2 per rank, kv 2 < 4 ranks → 1 each; head_dim 256 wins over 1024/8.
        let s = shapes(doc, 4);
        assert_eq!(s[0], ("qkv".to_string(), 1024, (2 + 2) * 256));
        assert_eq!(s[1], ("o".to_string(), 512, 1024));
        assert_eq!(s[4], ("lm_head".to_string(), 1024, 251), "vocab rounds up per rank");
    }

    #[test]
    fn mixture_of_experts_fields_give_expert_layers() {
        // Mixtral-8x7B: experts with intermediate_size, no dense MLP.
        let mixtral = json!({"hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
            "vocab_size": 32000});
        let names: Vec<String> = shapes(mixtral, 8).into_iter().map(|l| l.0).collect();
        assert_eq!(names, ["qkv", "o", "expert_gate_up", "expert_down", "lm_head"]);
        // Qwen-MoE style: num_experts, moe_intermediate_size and a shared expert.
        let qwen = json!({"hidden_size": 2048, "intermediate_size": 5632,
            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
            "num_attention_heads": 16, "num_experts": 60, "vocab_size": 151936});
        let s = shapes(qwen, 1);
        assert!(s.contains(&("expert_down".to_string(), 1408, 2048)), "{s:?}");
        assert!(s.contains(&("shared_expert_gate_up".to_string(), 2048, 11264)), "{s:?}");
        assert!(!s.iter().any(|l| l.0 == "gate_up"), "{s:?}");
    }

    #[test]
    fn bad_configs_name_the_field_and_the_fix() {
        let err =
            |doc: Value, tp| format!("{:#}", ModelShapes::from_config(&doc, tp, "m").unwrap_err());
        let base = json!({"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
            "vocab_size": 100});
        let mut d = base.clone();
        d.as_object_mut().unwrap().remove("vocab_size");
        assert!(err(d, 1).contains("lacks vocab_size"));
        let mut d = base.clone();
        d["hidden_size"] = json!("64");
        assert!(err(d, 1).contains("hidden_size is \"64\", not a positive whole number"));
        assert!(err(base.clone(), 3).contains("num_attention_heads 4 does not split over --tp 3"));
        let mut d = base.clone();
        d["kv_lora_rank"] = json!(512);
        assert!(err(d, 1).contains("kv_lora_rank"));
        let mut d = base.clone();
        d.as_object_mut().unwrap().remove("intermediate_size");
        assert!(err(d, 1).contains("lacks intermediate_size"));
        assert!(err(json!([1]), 1).contains("not a JSON object"));
        assert!(err(base, 0).contains("--tp 0"));
    }

    #[test]
    fn the_shipped_example_configs_read_as_their_models() {
        let read = |text: &str, tp| {
            let doc: Value = serde_json::from_str(text).unwrap();
            ModelShapes::from_config(&doc, tp, "m").unwrap()
        };
        let smol = read(include_str!("../../../../../examples/models/smollm2-135m.json"), 1);
        assert_eq!(
            smol.describe(),
            "model LlamaForCausalLM (tp 1): qkv 576→960, o 576→576, gate_up 576→3072, \
             down 1536→576, lm_head 576→49152"
        );
        let qwen = read(include_str!("../../../../../examples/models/qwen2.5-0.5b.json"), 2);
        assert_eq!(qwen.layers[0], layer("qkv", 896, 576));
        let mixtral = read(include_str!("../../../../../examples/models/mixtral-8x7b.json"), 8);
        assert_eq!(
            mixtral.describe(),
            "model MixtralForCausalLM (tp 8): qkv 4096→768, o 512→4096, \
             expert_gate_up 4096→3584, expert_down 1792→4096, lm_head 4096→4000"
        );
        mixtral.check_fits(1 << 30).unwrap();
        let big = read(include_str!("../../../../../examples/models/qwen2.5-0.5b.json"), 1);
        let err = format!("{:#}", big.check_fits(1 << 29).unwrap_err());
        assert!(err.contains("layer lm_head (896×151936) needs 0.5 GiB"), "{err}");
        assert!(err.contains("larger --tp"), "{err}");
    }

    #[test]
    fn a_multimodal_config_uses_its_text_model_and_shapes_dedupe() {
        let doc = json!({"architectures": ["LlavaForConditionalGeneration"],
            "text_config": {"hidden_size": 64, "intermediate_size": 32,
                "num_attention_heads": 4, "vocab_size": 64}});
        let m = ModelShapes::from_config(&doc, 1, "m").unwrap();
        assert_eq!(m.name, "LlavaForConditionalGeneration");
        // o (64→64) and gate_up (64→64) and lm_head (64→64) share one shape.
        let d = m.distinct();
        assert_eq!(d[1], ((64, 64), vec!["o", "gate_up", "lm_head"]));
        assert!(m.describe().starts_with("model LlavaForConditionalGeneration (tp 1): qkv 64→192"));
    }
}
