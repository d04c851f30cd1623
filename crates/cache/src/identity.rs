//! Environment identity: which machine measured an entry, and when an entry
//! is stale.
//!
//! This module owns [`Identity::current`] (the CPU this process runs on),
//! [`Identity::digest`] (a stable short name for an identity, the `env` of
//! every entry) and the staleness rule [`is_stale`]. It reads `/proc/cpuinfo`
//! and asks the OS for the core count; it must never write anything, and the
//! digest must never depend on Rust's randomized `Hash`.

use super::entry::{Entry, Identity};

/// Marks the canonical form; bump it if the digest's input ever changes.
const DIGEST_SCHEME: &str = "ranktune-identity-v1";

/// For tests only: replaces the detected machine with another one,
/// `MODEL;CAPABILITY;CORES` (any field left empty keeps what was detected).
/// CI runs the doc examples a second time with it set, which proves that no
/// expectation depends on the machine that runs the tests. Never set it in a
/// job: entries measured under it are stamped with a machine that is not
/// the one that measured them.
pub const TEST_MACHINE_ENV: &str = "RANKTUNE_TEST_MACHINE";

impl Identity {
    /// The identity of the CPU this process runs on: ranktune's version, the
    /// CPU model name (from `/proc/cpuinfo`), the architecture with the SIMD
    /// features that change kernel speed, and the cores available to this
    /// process. Detected once per process.
    ///
    /// ```
    /// let id = ranktune_cache::Identity::current();
    /// assert_eq!(id.device_kind, "cpu");
    /// assert!(id.cores >= 1);
    /// ```
    pub fn current() -> Identity {
        // Reading /proc/cpuinfo costs milliseconds (the kernel asks every
        // core for its clock), and the answer does not change: once per process.
        static CURRENT: std::sync::OnceLock<Identity> = std::sync::OnceLock::new();
        CURRENT.get_or_init(Self::detect).clone()
    }

    fn detect() -> Identity {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let detected = Identity {
            lib_version: env!("CARGO_PKG_VERSION").to_string(),
            device_kind: "cpu".to_string(),
            device_name: cpu_model_name(&cpuinfo),
            capability: cpu_capability(),
            cores: std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
                .unwrap_or(1),
        };
        match std::env::var(TEST_MACHINE_ENV) {
            Ok(spec) if !spec.trim().is_empty() => with_test_machine(detected, &spec),
            _ => detected,
        }
    }

    /// A stable 16-hex-digit digest of this identity (FNV-1a, 64 bit, over a
    /// length-prefixed canonical string). The same identity gives the same
    /// digest in every process, on every machine and in every build.
    ///
    /// ```
    /// let id = ranktune_cache::Identity::current();
    /// assert_eq!(id.digest(), id.clone().digest());
    /// assert_eq!(id.digest().len(), 16);
    /// ```
    pub fn digest(&self) -> String {
        let mut canonical = String::new();
        for field in [
            DIGEST_SCHEME,
            &self.lib_version,
            &self.device_kind,
            &self.device_name,
            &self.capability,
            &self.cores.to_string(),
        ] {
            canonical.push_str(&field.len().to_string());
            canonical.push(':');
            canonical.push_str(field);
            canonical.push('\n');
        }
        format!("{:016x}", fnv1a64(canonical.as_bytes()))
    }

    /// One line for people: `ranktune 0.1.0, cpu "Model", x86_64+avx2, 8
    /// cores` for ranktune's own measurements; for entries imported from
    /// another library, which library measured them and on what:
    /// `measured by TensorRT-LLM 1.2.0rc1 on cuda "NVIDIA H200", 9.0`.
    ///
    /// ```
    /// let mut id = ranktune_cache::Identity::current();
    /// assert!(id.describe().starts_with("ranktune "));
    /// id.lib_version = "trtllm-1.2.0rc1".into();
    /// assert!(id.describe().starts_with("measured by TensorRT-LLM 1.2.0rc1 on "));
    /// ```
    pub fn describe(&self) -> String {
        let Some((library, version)) = foreign_library(&self.lib_version) else {
            return format!(
                "ranktune {}, {} \"{}\", {}, {} cores",
                self.lib_version, self.device_kind, self.device_name, self.capability, self.cores
            );
        };
        let mut line = format!("measured by {library}");
        if !version.is_empty() && version != "unknown" {
            line.push(' ');
            line.push_str(version);
        }
        line.push_str(&format!(" on {} \"{}\"", self.device_kind, self.device_name));
        if !self.capability.is_empty() && self.capability != "unknown" {
            line.push_str(", ");
            line.push_str(&self.capability);
        }
        if self.cores > 0 {
            line.push_str(&format!(", {} cores", self.cores));
        }
        line
    }
}

/// The libraries whose files ranktune imports, by the `lib_version` their
/// importers (crate `ranktune-formats`) give the entries' identities: a
/// prefix followed by the library's version, or the whole value.
const FOREIGN_LIBRARIES: &[(&str, &str)] = &[
    ("trtllm-", "TensorRT-LLM"),
    ("flashinfer-", "FlashInfer"),
    ("vllm-moe-triton-", "a vLLM/SGLang fused-MoE config, Triton"),
    ("triton", "Triton"),
];

/// The library that measured entries of this `lib_version`, and its
/// version, when it is not ranktune.
pub fn foreign_library(lib_version: &str) -> Option<(&'static str, &str)> {
    FOREIGN_LIBRARIES
        .iter()
        .find_map(|(prefix, name)| lib_version.strip_prefix(prefix).map(|v| (*name, v)))
}

/// True when `entry` was measured under another environment than
/// `current_env_digest` (see [`Identity::digest`]). Stale entries are not
/// used for decisions but stay in the file until pruned. The tuner also
/// compares the candidate-set checksum itself.
///
/// ```
/// # use ranktune_cache::{is_stale, Entry};
/// let entry = Entry { runner_index: 0, tactic: serde_json::json!(1), time_us: 1.0,
///     candidates: vec![], checksum: "c".into(), env: "abc".into(), created_unix: 0 };
/// assert!(!is_stale(&entry, "abc"));
/// assert!(is_stale(&entry, "def"));
/// ```
pub fn is_stale(entry: &Entry, current_env_digest: &str) -> bool {
    entry.env != current_env_digest
}

use ranktune_core::hash::fnv1a64;

/// `id` with the fields of a [`TEST_MACHINE_ENV`] value put in; a core
/// count that is not a positive number keeps the detected one, with a
/// warning (the variable is for tests: a slip there must not stop a job).
fn with_test_machine(mut id: Identity, spec: &str) -> Identity {
    let mut fields = spec.splitn(3, ';').map(str::trim);
    if let Some(model) = fields.next().filter(|f| !f.is_empty()) {
        model.clone_into(&mut id.device_name);
    }
    if let Some(capability) = fields.next().filter(|f| !f.is_empty()) {
        capability.clone_into(&mut id.capability);
    }
    match fields.next().filter(|f| !f.is_empty()).map(str::parse::<u32>) {
        Some(Ok(cores)) if cores > 0 => id.cores = cores,
        Some(_) => tracing::warn!(
            "{TEST_MACHINE_ENV}={spec:?}: the core count is not a positive number; keeping {} \
             (the form is MODEL;CAPABILITY;CORES)",
            id.cores
        ),
        None => {}
    }
    id
}

/// The CPU model from `/proc/cpuinfo` text (x86 `model name`, or the ARM
/// `Hardware`/`CPU part` lines), or `unknown` when there is none.
fn cpu_model_name(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == name && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    field("model name")
        .or_else(|| field("Hardware"))
        .or_else(|| field("CPU part").map(|p| format!("cpu part {p}")))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Architecture plus the SIMD features that change which kernel is fastest.
fn cpu_capability() -> String {
    #[allow(unused_mut)]
    let mut features: Vec<&str> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => { $( if std::arch::is_x86_feature_detected!($f) { features.push($f); } )* };
        }
        detect!("sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni");
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => { $( if std::arch::is_aarch64_feature_detected!($f) { features.push($f); } )* };
        }
        detect!("neon", "sve", "sve2");
    }
    if features.is_empty() {
        std::env::consts::ARCH.to_string()
    } else {
        format!("{}+{}", std::env::consts::ARCH, features.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_stable_and_sensitive() {
        let a = Identity {
            lib_version: "0.1.0".into(),
            device_kind: "cpu".into(),
            device_name: "X".into(),
            capability: "x86_64+avx2".into(),
            cores: 8,
        };
        // Pinned: the digest is part of the file format.
        assert_eq!(a.digest(), a.clone().digest());
        let mut b = a.clone();
        b.cores = 16;
        assert_ne!(a.digest(), b.digest());
        let mut c = a.clone();
        c.device_name = "X\n".into();
        assert_ne!(a.digest(), c.digest());
    }

    #[test]
    fn a_test_machine_replaces_the_fields_it_names() {
        let base = Identity {
            lib_version: "0.1.0".into(),
            device_kind: "cpu".into(),
            device_name: "Real".into(),
            capability: "x86_64+avx".into(),
            cores: 2,
        };
        let id = with_test_machine(base.clone(), "Other CPU; riscv64 ; 96");
        assert_eq!(
            (id.device_name.as_str(), id.capability.as_str(), id.cores),
            ("Other CPU", "riscv64", 96)
        );
        let id = with_test_machine(base.clone(), "Only the model");
        assert_eq!(
            (id.device_name.as_str(), id.capability.as_str(), id.cores),
            ("Only the model", "x86_64+avx", 2)
        );
        let id = with_test_machine(base, ";;zero");
        assert_eq!((id.device_name.as_str(), id.cores), ("Real", 2));
    }

    #[test]
    fn model_name_parsing() {
        let x86 = "processor\t: 0\nmodel name\t: Intel(R)  Xeon(R) CPU\nflags : fpu\n";
        assert_eq!(cpu_model_name(x86), "Intel(R) Xeon(R) CPU");
        assert_eq!(cpu_model_name("CPU part\t: 0xd0c\n"), "cpu part 0xd0c");
        assert_eq!(cpu_model_name(""), "unknown");
    }
}
