//! Bucket generation and mapping, the clamp, constraints and profiles.

use crate::tune_support;

use proptest::prelude::*;
use ranktune_tune::*;
use tune_support::*;

#[test]
fn powers_of_two_up_to_max() {
    let g = BucketGen::PowersOfTwo { min: 1 };
    assert_eq!(g.generate(8192).len(), 14);
    assert_eq!(g.generate(100), vec![1, 2, 4, 8, 16, 32, 64]);
    assert_eq!(BucketGen::PowersOfTwo { min: 3 }.generate(32), vec![4, 8, 16, 32]);
    assert!(g.generate(0).is_empty());
}

#[test]
fn explicit_and_custom_generators() {
    let e = BucketGen::Explicit(vec![48, 16, 16, 4096, 0]);
    assert_eq!(e.generate(1000), vec![16, 48]);
    let c = DynamicDim::custom(0, 0, |max| (1..=max).step_by(100).collect(), |v| v / 100 * 100 + 1);
    assert_eq!(c.gen.generate(250), vec![1, 101, 201]);
    assert_eq!(c.map.map(250), 201);
}

#[test]
fn last_power_of_two_mapping() {
    let m = BucketMap::LastPowerOfTwo;
    assert_eq!(
        (m.map(0), m.map(1), m.map(2), m.map(3), m.map(1000), m.map(1024)),
        (1, 1, 2, 2, 512, 1024)
    );
    assert_eq!(last_power_of_two(u64::MAX), 1 << 63);
}

#[test]
fn explicit_list_maps_to_floor_or_smallest() {
    let d = DynamicDim::explicit(0, 0, &[64, 16, 256]);
    assert_eq!(d.map.map(1), 16);
    assert_eq!(d.map.map(16), 16);
    assert_eq!(d.map.map(100), 64);
    assert_eq!(d.map.map(10_000), 256);
}

#[test]
fn clamp_at_max_tokens_and_constraint_derives_dim() {
    let cfg = rows_config(256);
    let k = cfg.key_of(&Rows::new(100_000, 7)).unwrap();
    assert_eq!(k.to_nested(), vec![vec![256, 7], vec![256, 7]]);
    // The output's rows are derived from the bucketed input rows, whatever they were.
    let mut odd = Rows::new(100, 7);
    odd.shapes[1][0] = 3;
    assert_eq!(cfg.key_of(&odd).unwrap().to_nested(), vec![vec![64, 7], vec![64, 7]]);
}

#[test]
fn static_dims_are_kept_and_profiles_are_the_product() {
    let cfg = TuningConfig::new(vec![
        DynamicDim::powers_of_two(0, 0),
        DynamicDim::explicit(0, 1, &[8, 32, 64]).with_max(32),
    ])
    .with_constraint(Constraint::same_as(1, 0, 0, 0))
    .with_max_tokens(16);
    let profiles = cfg.profiles(&[vec![1, 1, 5], vec![1, 9]]);
    assert_eq!(profiles.len(), 5 * 2);
    for p in &profiles {
        assert_eq!(p.dim(0, 2), 5, "static dim kept");
        assert_eq!(p.dim(1, 1), 9, "static dim kept");
        assert_eq!(p.dim(1, 0), p.dim(0, 0), "constraint applied");
    }
    assert!(profiles.iter().any(|p| p.dim(0, 0) == 16 && p.dim(0, 1) == 32));
    // A derived dim from a user function.
    let cfg = TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)])
        .with_constraint(Constraint::new(1, 0, |k| k.dim(0, 0) * 2));
    assert_eq!(
        cfg.key_of(&Rows::new(100, 3)).unwrap().to_nested(),
        vec![vec![64, 3], vec![128, 3]]
    );
}

#[test]
fn shapes_beyond_the_key_limits_have_no_key() {
    struct Many;
    impl TuneInputs for Many {
        fn num_inputs(&self) -> usize {
            1
        }
        fn shape(&self, _: usize) -> &[usize] {
            &[1; 40]
        }
        fn synthetic(_: &[Vec<u64>]) -> Result<Self, RunError> {
            Ok(Many)
        }
    }
    assert!(TuningConfig::default().key_of(&Many).is_none());
    // A dynamic dim the input does not have → no key (fallback), no panic.
    assert!(TuningConfig::new(vec![DynamicDim::powers_of_two(5, 0)])
        .key_of(&Rows::new(4, 4))
        .is_none());
}

proptest! {
    #[test]
    fn mapped_value_is_a_generated_bucket(v in 0u64..1_000_000, max in 1u64..100_000) {
        let cfg = TuningConfig::new(vec![DynamicDim::powers_of_two(0, 0)]).with_max_tokens(max);
        let buckets = cfg.dynamic[0].gen.generate(max);
        let k = cfg.key_of(&Rows::new(v as usize, 3)).unwrap();
        prop_assert!(buckets.contains(&k.dim(0, 0)));
        prop_assert!(k.dim(0, 0) <= v.max(1).min(max));
    }

    #[test]
    fn explicit_mapping_is_floor(v in 0u64..10_000, mut list in proptest::collection::vec(1u64..5000, 1..8)) {
        let d = DynamicDim::explicit(0, 0, &list);
        list.sort_unstable();
        let b = d.map.map(v);
        prop_assert!(list.contains(&b));
        if v >= list[0] {
            prop_assert!(b <= v);
            prop_assert!(list.iter().all(|&x| x <= b || x > v));
        } else {
            prop_assert_eq!(b, list[0]);
        }
    }

    #[test]
    fn key_roundtrips_and_hash_is_deterministic(shape in proptest::collection::vec(proptest::collection::vec(0u64..1<<40, 0..4), 0..4)) {
        let k = BucketKey::from_nested(&shape).unwrap();
        prop_assert_eq!(k.to_nested(), shape.clone());
        prop_assert_eq!(k.hash_with(7), BucketKey::from_nested(&shape).unwrap().hash_with(7));
    }
}
