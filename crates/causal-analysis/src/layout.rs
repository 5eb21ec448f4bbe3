//! A layered drawing of a task's DAG (pure): each event gets a layer (its longest distance from a
//! root) and a position within its layer chosen to reduce edge crossings.
//!
//! This is the Sugiyama framework (Sugiyama, Tagawa, Toda, "Methods for visual understanding of
//! hierarchical system structures", IEEE SMC 1981) in its simplest form, as dagre and ELK's
//! layered algorithm do it: longest-path layering, then a few sweeps of the barycenter heuristic
//! (each event moves to the mean position of its neighbours in the layer above, then below).
//! Long edges get no dummy nodes: at 100,000 events the drawing must stay linear in size, and the
//! page draws an edge that skips layers as one straight line.

use serde::Serialize;

use crate::graph::TaskGraph;

/// Sweeps of the barycenter heuristic (down then up counts as two).
const SWEEPS: usize = 4;

/// The layout of [`layered`]: for event `i` of the graph, `layer[i]` (0 for roots) and
/// `position[i]` (0-based slot within its layer; no two events of a layer share one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DagLayout {
    /// Layer of each event: the number of edges on the longest path from a root to it.
    pub layer: Vec<u32>,
    /// Position of each event within its layer.
    pub position: Vec<u32>,
    /// Number of layers.
    pub layers: u32,
    /// Events in the widest layer.
    pub width: u32,
}

/// Lays out `g` in layers (module docs). Events on a cycle are layered after their parents that
/// are not on it. Runs in O((V + E) log V) per sweep.
pub fn layered(g: &TaskGraph) -> DagLayout {
    let n = g.len();
    let mut layer = vec![0u32; n];
    let mut done = vec![false; n];
    for &i in g.topological_order() {
        layer[i] = g
            .parents_of(i)
            .iter()
            .filter(|&&p| done[p])
            .map(|&p| layer[p] + 1)
            .max()
            .unwrap_or(0);
        done[i] = true;
    }
    let layers = layer.iter().max().map_or(0, |&l| l + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers as usize];
    // Initial order: by (timestamp, id), so that the drawing does not depend on arrival order.
    let mut by_time: Vec<usize> = (0..n).collect();
    by_time.sort_by_key(|&i| g.order_key(i));
    for i in by_time {
        rows[layer[i] as usize].push(i);
    }
    let mut position = vec![0u32; n];
    let place = |rows: &Vec<Vec<usize>>, position: &mut Vec<u32>| {
        for row in rows {
            for (p, &i) in row.iter().enumerate() {
                position[i] = p as u32;
            }
        }
    };
    place(&rows, &mut position);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (1..rows.len()).collect()
        } else {
            (0..rows.len().saturating_sub(1)).rev().collect()
        };
        for l in order {
            let mut keyed: Vec<(f64, u32, usize)> = rows[l]
                .iter()
                .map(|&i| {
                    let nb = if down {
                        g.parents_of(i)
                    } else {
                        g.children_of(i)
                    };
                    let adjacent: Vec<f64> = nb
                        .iter()
                        .filter(|&&j| layer[j] as usize != l)
                        .map(|&j| f64::from(position[j]))
                        .collect();
                    let bary = if adjacent.is_empty() {
                        f64::from(position[i])
                    } else {
                        adjacent.iter().sum::<f64>() / adjacent.len() as f64
                    };
                    (bary, position[i], i)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            rows[l] = keyed.into_iter().map(|k| k.2).collect();
            for (p, &i) in rows[l].iter().enumerate() {
                position[i] = p as u32;
            }
        }
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0) as u32;
    DagLayout {
        layer,
        position,
        layers,
        width,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Parent};

    fn ev(id: &str, ts: i64, parents: &[&str]) -> Event {
        Event {
            task: "T".into(),
            id: id.into(),
            timestamp_ns: Some(ts),
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        }
    }

    #[test]
    fn layers_are_longest_paths_and_positions_are_distinct() {
        // A → B → D, A → C → D, A → D: D is on layer 2 (the longest path), not 1.
        let g = TaskGraph::build(
            "T",
            vec![
                ev("A", 0, &[]),
                ev("B", 1, &["A"]),
                ev("C", 2, &["A"]),
                ev("D", 3, &["B", "C", "A"]),
                ev("E", 4, &["D"]),
            ],
        );
        let l = layered(&g);
        let at = |id: &str| g.index_of(id).unwrap();
        let layers: Vec<u32> = ["A", "B", "C", "D", "E"]
            .iter()
            .map(|i| l.layer[at(i)])
            .collect();
        assert_eq!(layers, [0, 1, 1, 2, 3]);
        assert_eq!((l.layers, l.width), (4, 2));
        let mut mid = [l.position[at("B")], l.position[at("C")]];
        mid.sort();
        assert_eq!(mid, [0, 1]);
    }

    #[test]
    fn barycenters_uncross_two_chains() {
        // Two chains whose second layer starts crossed (by time): A1 → B1 at t=9, A2 → B2 at
        // t=2. The sweep puts B1 under A1.
        let g = TaskGraph::build(
            "T",
            vec![
                ev("A1", 0, &[]),
                ev("A2", 1, &[]),
                ev("B1", 9, &["A1"]),
                ev("B2", 2, &["A2"]),
            ],
        );
        let l = layered(&g);
        let at = |id: &str| g.index_of(id).unwrap();
        assert_eq!(l.position[at("A1")], l.position[at("B1")]);
        assert_eq!(l.position[at("A2")], l.position[at("B2")]);
    }
}
