//! Matching collective calls across ranks, and the blame: [`analyze`], one
//! step per function — the calls grouped by process group, the members of
//! each group chosen and their calls keyed (by `Seq` or by order), the
//! window of positions every member captured, the calls at each position
//! lined up and compared, the wait of a matched collective attributed to
//! the rank that arrived last (and the span before it), and per rank the
//! collective where it caused the most wait.
//!
//! It only reads [`CollectiveCalls`] the collector made; it never sees an
//! event or a file.

use super::{
    Call, CollectiveCalls, CollectiveSkew, Collectives, Culprit, Mismatch, Ns, RankBlame, NONE,
    NO_SEQ, WORST,
};
use std::collections::BTreeMap;

/// Matches collectives across ranks and attributes wait.
/// `ranks` is `(rank, calls)` in rank order.
pub fn analyze(ranks: &[(u32, &CollectiveCalls)]) -> Collectives {
    let mut out = Collectives { per_rank: unblamed(ranks), ..Collectives::default() };
    let Some(offsets) = offsets(ranks) else { return out };
    let mut tally = Tally::new(ranks.len());
    for (group, present) in &groups(ranks) {
        let (members, by_seq) = members(ranks, present, &offsets);
        if members.len() < 2 {
            continue;
        }
        if let Some((count, mismatch)) = missing(&members, group, by_seq) {
            out.mismatched += count;
            out.mismatches.push(mismatch);
            continue;
        }
        let g = Group { ranks, members: &members, name: group, by_seq };
        g.line_up(&window(&members, by_seq), &mut out, &mut tally);
    }
    tally.finish(ranks, &mut out);
    out
}

/// Every rank of the summary, no blame yet.
fn unblamed(ranks: &[(u32, &CollectiveCalls)]) -> Vec<RankBlame> {
    ranks
        .iter()
        .map(|(r, _)| RankBlame {
            rank: *r,
            last_count: 0,
            wait_caused_us: 0.0,
            wait_suffered_us: 0.0,
        })
        .collect()
}

/// Each rank's clock offset from the earliest base among the ranks with
/// calls (`None` when no rank has any).
fn offsets(ranks: &[(u32, &CollectiveCalls)]) -> Option<Vec<Ns>> {
    let min_base = ranks.iter().filter(|r| !r.1.is_empty()).map(|r| r.1.base_ns).min()?;
    Some(
        ranks.iter().map(|r| Ns::try_from(r.1.base_ns - min_base).unwrap_or(Ns::MAX / 4)).collect(),
    )
}

/// A process group's calls, per rank (index into `ranks`) that has any.
type Present<'a> = Vec<(usize, Vec<&'a Call>)>;

/// The calls of the ranks that have any, by process group name (`None`:
/// not recorded).
fn groups<'a>(ranks: &[(u32, &'a CollectiveCalls)]) -> BTreeMap<Option<String>, Present<'a>> {
    let mut groups: BTreeMap<Option<String>, Present<'a>> = BTreeMap::new();
    for (i, (_, cc)) in ranks.iter().enumerate().filter(|(_, r)| !r.1.is_empty()) {
        let mut per: BTreeMap<Option<String>, Vec<&Call>> = BTreeMap::new();
        for c in &cc.calls {
            per.entry(cc.str(c.group).map(str::to_owned)).or_default().push(c);
        }
        for (g, calls) in per {
            groups.entry(g).or_default().push((i, calls));
        }
    }
    groups
}

/// One member of a group: its calls keyed by `Seq` (or position) in key
/// order, and its clock offset.
struct Member<'a> {
    rank: u32,
    idx: usize,
    calls: Vec<(u64, &'a Call)>,
    offset: Ns,
}

/// The members of a group, in rank order: the recorded group ranks we have
/// traces of, else the ranks that have calls in the group; and whether the
/// group is matched by `Seq` (every call has one).
fn members<'a>(
    ranks: &[(u32, &CollectiveCalls)],
    present: &Present<'a>,
    offsets: &[Ns],
) -> (Vec<Member<'a>>, bool) {
    let listed = present.iter().find_map(|(i, calls)| {
        calls.iter().find_map(|c| ranks[*i].1.str(c.members)).and_then(parse_ranks)
    });
    let mut member_idx: Vec<usize> = match listed {
        Some(l) => (0..ranks.len()).filter(|&i| l.contains(&ranks[i].0)).collect(),
        None => present.iter().map(|(i, _)| *i).collect(),
    };
    if member_idx.is_empty() {
        member_idx = present.iter().map(|(i, _)| *i).collect();
    }
    let by_seq = present.iter().all(|(_, calls)| calls.iter().all(|c| c.seq != NO_SEQ));
    let mut members: Vec<Member<'a>> = member_idx
        .iter()
        .map(|&i| {
            let calls: Vec<&Call> =
                present.iter().find(|(j, _)| *j == i).map(|(_, c)| c.clone()).unwrap_or_default();
            let mut keyed: Vec<(u64, &Call)> = if by_seq {
                calls.into_iter().map(|c| (c.seq, c)).collect()
            } else {
                calls.into_iter().enumerate().map(|(n, c)| (n as u64, c)).collect()
            };
            keyed.sort_by_key(|(k, c)| (*k, c.start));
            Member { rank: ranks[i].0, idx: i, calls: keyed, offset: offsets[i] }
        })
        .collect();
    members.sort_by_key(|m| m.rank);
    (members, by_seq)
}

/// The positions to line up: with `Seq`, the window every member captured
/// (profiler windows start and stop at different collectives on each
/// rank); without, 0 .. the longest list.
fn window(members: &[Member<'_>], by_seq: bool) -> Vec<u64> {
    let (lo, hi) = if by_seq {
        let lo = members.iter().map(|m| m.calls.first().map_or(u64::MAX, |c| c.0)).max();
        let hi = members.iter().map(|m| m.calls.last().map_or(0, |c| c.0)).min();
        (lo.unwrap_or(0), hi.unwrap_or(0))
    } else {
        (0, members.iter().map(|m| m.calls.len() as u64).max().unwrap_or(0).saturating_sub(1))
    };
    let mut keys: Vec<u64> = members
        .iter()
        .flat_map(|m| m.calls.iter().map(|c| c.0))
        .filter(|k| *k >= lo && *k <= hi)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Members without any call in the group: the group's mismatch (counting
/// every call of the longest list), or `None` when all have calls.
fn missing(
    members: &[Member<'_>],
    group: &Option<String>,
    by_seq: bool,
) -> Option<(u64, Mismatch)> {
    if !members.iter().any(|m| m.calls.is_empty()) {
        return None;
    }
    let missing: Vec<String> =
        members.iter().filter(|m| m.calls.is_empty()).map(|m| m.rank.to_string()).collect();
    let count = members.iter().map(|m| m.calls.len() as u64).max().unwrap_or(0);
    let mismatch = Mismatch {
        group: group.clone(),
        position: 0,
        by_seq,
        detail: format!(
            "rank{} {} no collectives in this group; the others have {}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            members.iter().map(|m| m.calls.len()).max().unwrap_or(0)
        ),
    };
    Some((count, mismatch))
}

/// The blame gathered over every group, per rank index.
struct Tally {
    caused: Vec<Ns>,
    suffered: Vec<Ns>,
    last_count: Vec<u64>,
    worst: Vec<CollectiveSkew>,
    culprits: BTreeMap<(usize, String, Option<String>), CulpritAcc>,
}

#[derive(Default)]
struct CulpritAcc {
    count: u64,
    caused: Ns,
    /// prev span name → (excess sum ns, count)
    spans: BTreeMap<String, (i128, u64)>,
}

/// One group being lined up.
struct Group<'g, 'a> {
    ranks: &'g [(u32, &'a CollectiveCalls)],
    members: &'g [Member<'a>],
    name: &'g Option<String>,
    by_seq: bool,
}

/// The calls of the members at one position (`None`: that member lacks it),
/// in member order.
type AtKey<'a> = Vec<Option<&'a Call>>;

impl<'a> Group<'_, 'a> {
    /// Lines the members' calls up at each of `keys`: the first position
    /// where they differ is the group's mismatch and every later one counts
    /// as mismatched; each matched one is blamed.
    fn line_up(&self, keys: &[u64], out: &mut Collectives, tally: &mut Tally) {
        let mut cursor = vec![0usize; self.members.len()];
        let mut diverged = false;
        for &key in keys {
            let at = self.at(key, &mut cursor);
            if diverged {
                out.mismatched += 1;
                continue;
            }
            if !self.same(&at) {
                diverged = true;
                out.mismatched += 1;
                out.mismatches.push(Mismatch {
                    group: self.name.clone(),
                    position: key,
                    by_seq: self.by_seq,
                    detail: describe(self.members, &at, &|mi, c| self.name_of(mi, c), self.by_seq),
                });
                continue;
            }
            out.matched += 1;
            self.blame(key, &at, tally);
        }
    }

    /// Each member's call at `key`, advancing the members' cursors past it.
    fn at(&self, key: u64, cursor: &mut [usize]) -> AtKey<'a> {
        let mut at: AtKey<'a> = Vec::with_capacity(self.members.len());
        for (m, cur) in self.members.iter().zip(cursor.iter_mut()) {
            while *cur < m.calls.len() && m.calls[*cur].0 < key {
                *cur += 1;
            }
            if *cur < m.calls.len() && m.calls[*cur].0 == key {
                at.push(Some(m.calls[*cur].1));
                *cur += 1;
            } else {
                at.push(None);
            }
        }
        at
    }

    /// The name of member `mi`'s call `c`.
    fn name_of(&self, mi: usize, c: &Call) -> String {
        self.ranks[self.members[mi].idx].1.str(c.name).unwrap_or("?").to_string()
    }

    /// Whether every member has the same collective at this position.
    fn same(&self, at: &AtKey<'_>) -> bool {
        let norms: Vec<Option<String>> = at
            .iter()
            .enumerate()
            .map(|(mi, c)| c.map(|c| normalize(&self.name_of(mi, c))))
            .collect();
        let first = norms.iter().flatten().next().cloned().unwrap_or_default();
        norms.iter().all(|n| n.as_deref() == Some(first.as_str()))
    }

    /// A matched collective: the rank that arrived last (on the shared
    /// clock) caused the wait since the second-to-last arrival, every
    /// member suffered the wait until the last one; the skew joins the
    /// worst list and the cause its culprit.
    fn blame(&self, key: u64, at: &AtKey<'_>, tally: &mut Tally) {
        let members = self.members;
        let mut arr: Vec<(Ns, usize)> = at
            .iter()
            .enumerate()
            .filter_map(|(mi, c)| c.map(|c| (c.start.saturating_add(members[mi].offset), mi)))
            .collect();
        arr.sort_by_key(|&(t, mi)| (t, std::cmp::Reverse(members[mi].rank)));
        let (t_last, mi_last) = arr[arr.len() - 1];
        let t_second = arr[arr.len() - 2].0;
        let t_first = arr[0].0;
        let li = members[mi_last].idx;
        let delay = t_last.saturating_sub(t_second);
        tally.caused[li] = tally.caused[li].saturating_add(delay);
        tally.last_count[li] += 1;
        for &(t, mi) in &arr {
            let w = &mut tally.suffered[members[mi].idx];
            *w = w.saturating_add(t_last.saturating_sub(t));
        }
        let Some(last_call) = at[mi_last] else { return };
        let name = display(&self.name_of(mi_last, last_call));
        tally.worst.push(CollectiveSkew {
            name: name.clone(),
            group: self.name.clone(),
            seq: key,
            skew_us: us(t_last.saturating_sub(t_first)),
            last_rank: members[mi_last].rank,
            caused_us: us(delay),
        });
        if tally.worst.len() > 4 * WORST {
            trim(&mut tally.worst);
        }
        if delay > 0 {
            let acc = tally.culprits.entry((li, name, self.name.clone())).or_default();
            acc.count += 1;
            acc.caused = acc.caused.saturating_add(delay);
            if let Some((pname, excess)) = self.span_before(at, mi_last, last_call) {
                let e = acc.spans.entry(pname.to_string()).or_default();
                e.0 += i128::from(excess);
                e.1 += 1;
            }
        }
    }

    /// Of the span names with the most time before the collective on the
    /// last rank, the one with the most extra time over the same name
    /// before the same collective on the other ranks (their median; 0 where
    /// they lack it), and that extra time.
    fn span_before(
        &self,
        at: &AtKey<'_>,
        mi_last: usize,
        last_call: &Call,
    ) -> Option<(&'a str, Ns)> {
        let li = self.members[mi_last].idx;
        let mut best: Option<(&'a str, Ns)> = None;
        for &(pn, pd) in last_call.prev.iter().filter(|p| p.0 != NONE) {
            let Some(pname) = self.ranks[li].1.str(pn) else { continue };
            let mut others: Vec<Ns> = at
                .iter()
                .enumerate()
                .filter(|(mi, _)| *mi != mi_last)
                .filter_map(|(mi, c)| {
                    let cc = self.ranks[self.members[mi].idx].1;
                    c.map(|c| {
                        c.prev
                            .iter()
                            .find(|o| o.0 != NONE && cc.str(o.0) == Some(pname))
                            .map_or(0, |o| o.1)
                    })
                })
                .collect();
            others.sort_unstable();
            let med = others.get(others.len() / 2).copied().unwrap_or(0);
            let excess = pd.saturating_sub(med);
            if best.is_none_or(|b| excess > b.1) {
                best = Some((pname, excess));
            }
        }
        best
    }
}

impl Tally {
    fn new(ranks: usize) -> Self {
        Tally {
            caused: vec![0; ranks],
            suffered: vec![0; ranks],
            last_count: vec![0; ranks],
            worst: Vec::new(),
            culprits: BTreeMap::new(),
        }
    }

    /// The per-rank figures, the worst list and the culprits into `out`.
    fn finish(self, ranks: &[(u32, &CollectiveCalls)], out: &mut Collectives) {
        let mut worst = self.worst;
        trim(&mut worst);
        out.worst = worst;
        for (i, r) in out.per_rank.iter_mut().enumerate() {
            r.last_count = self.last_count[i];
            r.wait_caused_us = us(self.caused[i]);
            r.wait_suffered_us = us(self.suffered[i]);
        }
        out.culprits = culprits(ranks, self.culprits);
    }
}

/// Per rank, the collective where it caused the most wait, with the span
/// before it named only when it explains at least a quarter of the wait.
fn culprits(
    ranks: &[(u32, &CollectiveCalls)],
    accs: BTreeMap<(usize, String, Option<String>), CulpritAcc>,
) -> Vec<Culprit> {
    let mut best: BTreeMap<usize, Culprit> = BTreeMap::new();
    for ((li, name, group), acc) in accs {
        if best.get(&li).is_some_and(|b| b.caused_us >= us(acc.caused)) {
            continue;
        }
        let per_time = us(acc.caused) / acc.count.max(1) as f64;
        let span = acc
            .spans
            .iter()
            .max_by(|a, b| a.1 .0.cmp(&b.1 .0))
            .map(|(n, (sum, count))| (n.clone(), *sum as f64 / 1000.0 / (*count).max(1) as f64))
            .filter(|(_, extra)| *extra >= 0.25 * per_time && *extra > 0.0);
        best.insert(
            li,
            Culprit {
                rank: ranks[li].0,
                name,
                group,
                count: acc.count,
                caused_us: us(acc.caused),
                span,
            },
        );
    }
    best.into_values().collect()
}

fn trim(w: &mut Vec<CollectiveSkew>) {
    w.sort_by(|a, b| {
        b.skew_us.total_cmp(&a.skew_us).then(a.group.cmp(&b.group)).then(a.seq.cmp(&b.seq))
    });
    w.truncate(WORST);
}

/// "rank 2 has `allgather` where ranks 0, 1, 3 have `reduce_scatter`", or
/// "rank 2 has no collective at position 5 (the others: `allgather`)".
fn describe(
    members: &[Member<'_>],
    at: &[Option<&Call>],
    name_of: &dyn Fn(usize, &Call) -> String,
    by_seq: bool,
) -> String {
    // Group ranks by what they have.
    let mut by_what: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (mi, c) in at.iter().enumerate() {
        let what = match c {
            Some(c) => format!("`{}`", display(&name_of(mi, c))),
            None => "nothing".to_string(),
        };
        by_what.entry(what).or_default().push(members[mi].rank);
    }
    // The majority is "the others".
    let mut kinds: Vec<(String, Vec<u32>)> = by_what.into_iter().collect();
    kinds.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    let list = |v: &[u32]| {
        let s: Vec<String> = v.iter().map(u32::to_string).collect();
        format!("rank{} {}", if v.len() == 1 { "" } else { "s" }, s.join(", "))
    };
    let (major, major_ranks) = &kinds[0];
    let minority: Vec<String> = kinds[1..]
        .iter()
        .map(|(what, rs)| {
            let verb = if rs.len() == 1 { "has" } else { "have" };
            format!("{} {verb} {what}", list(rs))
        })
        .collect();
    let counts: Vec<String> =
        members.iter().map(|m| format!("{}: {}", m.rank, m.calls.len())).collect();
    format!(
        "{} where {} {} {major}{} (collectives per rank: {})",
        minority.join("; "),
        list(major_ranks),
        if major_ranks.len() == 1 { "has" } else { "have" },
        if by_seq { "" } else { " (matched by order: no Seq in this group)" },
        counts.join(", ")
    )
}

/// Comparable name: `c10d::allreduce_`, `nccl:all_reduce`, `allreduce` and
/// `ncclDevKernel_AllReduce_Sum_f32_RING_LL(…)` are all `allreduce`.
fn normalize(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    let n = n.split('(').next().unwrap_or("");
    let n = n
        .strip_prefix("nccl:")
        .or_else(|| n.strip_prefix("gloo:"))
        .or_else(|| n.strip_prefix("c10d::"))
        .unwrap_or(n);
    let n = match n.strip_prefix("nccldevkernel_").or_else(|| n.strip_prefix("ncclkernel_")) {
        Some(rest) => rest.split('_').next().unwrap_or(rest),
        None => n,
    };
    n.chars().filter(|c| *c != '_').collect()
}

/// Display name: kernel signatures lose their parameter list.
fn display(name: &str) -> String {
    match name.find('(') {
        Some(i) if name.starts_with("nccl") => name[..i].to_string(),
        _ => name.to_string(),
    }
}

/// `"[0, 1, 2]"` (a string or an array) to ranks.
fn parse_ranks(s: &str) -> Option<Vec<u32>> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    if s.trim().is_empty() {
        return None;
    }
    s.split(',').map(|x| x.trim().parse::<u32>().ok()).collect()
}

fn us(ns: Ns) -> f64 {
    ns as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::super::PREV;
    use super::*;

    #[test]
    fn names_normalize_across_sources() {
        for n in [
            "c10d::allreduce_",
            "nccl:all_reduce",
            "allreduce",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            "gloo:all_reduce",
        ] {
            assert_eq!(normalize(n), "allreduce", "{n}");
        }
        assert_ne!(normalize("nccl:all_gather"), normalize("nccl:all_reduce"));
    }

    #[test]
    fn group_ranks_parse_from_text() {
        assert_eq!(parse_ranks("[0, 1, 2, 3]"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_ranks("[]"), None);
        assert_eq!(parse_ranks("[a]"), None);
    }

    fn calls(starts: &[(i64, &str)]) -> CollectiveCalls {
        let mut cc = CollectiveCalls::default();
        for (i, (s, n)) in starts.iter().enumerate() {
            cc.strings.push((*n).to_string());
            cc.calls.push(Call {
                start: *s * 1000,
                name: i as u32,
                group: NONE,
                members: NONE,
                seq: NO_SEQ,
                prev: [(NONE, 0); PREV],
            });
        }
        cc
    }

    /// Rank 1 is 100 µs late to one collective; rank 2 is 5 µs late to two:
    /// rank 2 is last more often, rank 1 caused more wait.
    #[test]
    fn wait_caused_is_time_not_counts() {
        let r0 = calls(&[(0, "a"), (1000, "b"), (2000, "c")]);
        let r1 = calls(&[(100, "a"), (1000, "b"), (2000, "c")]);
        let r2 = calls(&[(0, "a"), (1005, "b"), (2005, "c")]);
        let c = analyze(&[(0, &r0), (1, &r1), (2, &r2)]);
        assert_eq!((c.matched, c.mismatched), (3, 0));
        assert_eq!(c.most_often_last().map(|r| r.rank), Some(2));
        assert_eq!(c.most_wait_caused().map(|r| r.rank), Some(1));
        assert_eq!(c.per_rank[1].wait_caused_us, 100.0);
        assert_eq!(c.per_rank[2].wait_caused_us, 10.0);
        // Rank 0 waited 100 + 5 + 5 µs.
        assert_eq!(c.per_rank[0].wait_suffered_us, 110.0);
        assert_eq!(c.worst[0].last_rank, 1);
        assert_eq!(c.worst[0].skew_us, 100.0);
    }

    #[test]
    fn a_different_collective_is_reported_at_its_position() {
        let r0 = calls(&[(0, "allreduce"), (10, "allgather"), (20, "allreduce")]);
        let r1 = calls(&[(0, "allreduce"), (10, "allreduce")]);
        let c = analyze(&[(0, &r0), (1, &r1)]);
        assert_eq!((c.matched, c.mismatched), (1, 2));
        let m = &c.mismatches[0];
        assert_eq!(m.position, 1);
        assert!(
            m.detail.contains("`allgather`") && m.detail.contains("`allreduce`"),
            "{}",
            m.detail
        );
    }
}
