//! The communication graph: any connected undirected graph, given as an edge list.

use crate::error::{Result, check_param};

/// Most agents a graph may have.
pub const MAX_AGENTS: usize = 1 << 16;

/// A connected undirected graph on agents `0..n`. Each agent's neighbours are listed in the
/// order the edge list first names them (the order an agent sums its couplings in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    edges: Vec<(usize, usize)>,
    neighbours: Vec<Vec<usize>>,
}

impl Graph {
    /// The graph of `edges` on agents `0..=max id`. Refuses self-loops, repeated edges (in
    /// either direction), more than [`MAX_AGENTS`] agents, an agent with no edge, and a graph
    /// that is not connected.
    pub fn from_edges(edges: &[(usize, usize)]) -> Result<Self> {
        check_param(!edges.is_empty(), || "graph: the edge list is empty".into())?;
        let n = edges.iter().map(|&(a, b)| a.max(b)).max().unwrap_or(0) + 1;
        check_param(n <= MAX_AGENTS, || {
            format!("graph: {n} agents, at most {MAX_AGENTS}")
        })?;
        let mut neighbours = vec![Vec::new(); n];
        for &(a, b) in edges {
            check_param(a != b, || format!("graph: self-loop at agent {a}"))?;
            check_param(!neighbours[a].contains(&b), || {
                format!("graph: edge ({a}, {b}) is listed twice")
            })?;
            neighbours[a].push(b);
            neighbours[b].push(a);
        }
        if let Some(lonely) = neighbours.iter().position(Vec::is_empty) {
            return Err(crate::ProtocolError::Parameters(format!(
                "graph: agent {lonely} has no edge (agents are numbered 0..{n})"
            )));
        }
        let mut seen = vec![false; n];
        let mut stack = vec![0];
        seen[0] = true;
        while let Some(a) = stack.pop() {
            for &b in &neighbours[a] {
                if !seen[b] {
                    seen[b] = true;
                    stack.push(b);
                }
            }
        }
        if let Some(cut) = seen.iter().position(|s| !s) {
            return Err(crate::ProtocolError::Parameters(format!(
                "graph: not connected (agent {cut} is unreachable from agent 0)"
            )));
        }
        Ok(Self {
            edges: edges.to_vec(),
            neighbours,
        })
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.neighbours.len()
    }

    /// Whether the graph has no agents (never, once built).
    pub fn is_empty(&self) -> bool {
        self.neighbours.is_empty()
    }

    /// The edges as given.
    pub fn edges(&self) -> &[(usize, usize)] {
        &self.edges
    }

    /// Agent `i`'s neighbours (empty for an agent not in the graph).
    pub fn neighbours(&self, i: usize) -> &[usize] {
        self.neighbours.get(i).map_or(&[], Vec::as_slice)
    }

    /// The largest degree.
    pub fn max_degree(&self) -> usize {
        self.neighbours.iter().map(Vec::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_follow_the_edge_list_order() {
        let g = Graph::from_edges(&[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)]).unwrap();
        assert_eq!(g.len(), 5);
        assert_eq!(g.neighbours(0), &[1, 4, 2]);
        assert_eq!(g.neighbours(2), &[1, 3, 0]);
        assert_eq!(g.max_degree(), 3);
        assert!(g.neighbours(9).is_empty());
    }

    #[test]
    fn bad_graphs_are_refused_with_the_reason() {
        for (edges, why) in [
            (vec![], "empty"),
            (vec![(0, 0)], "self-loop"),
            (vec![(0, 1), (1, 0)], "twice"),
            (vec![(0, 1), (2, 3)], "not connected"),
            (vec![(0, 2)], "agent 1 has no edge"),
            (vec![(0, MAX_AGENTS)], "at most"),
        ] {
            let e = Graph::from_edges(&edges).unwrap_err().to_string();
            assert!(e.contains(why), "{edges:?}: {e}");
        }
    }
}
