//! The indexes against brute force: whatever the points and the box, the creeps' grid and the towers'
//! index find exactly what a scan of every point finds.

use muster_world::geo::{Point, Rect};
use muster_world::index::grid::{Entry, Grid};
use muster_world::index::towers::TowerIndex;
use proptest::prelude::*;

fn point() -> impl Strategy<Value = Point> {
    (-50.0f32..1050.0, -50.0f32..1050.0).prop_map(|(x, y)| Point::new(x, y))
}

fn rect() -> impl Strategy<Value = Rect> {
    (point(), point()).prop_map(|(a, b)| Rect::from_corners(a, b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn grid_candidates_hold_every_point_in_the_box(
        points in prop::collection::vec(point(), 0..300),
        query in rect(),
        cell in 10.0f32..400.0,
    ) {
        let area = Rect::from_corners(Point::new(0.0, 0.0), Point::new(1000.0, 1000.0));
        let mut grid = Grid::new(area, cell);
        for (i, p) in points.iter().enumerate() {
            grid.insert(Entry { id: i as u32, owner: 0, pos: *p });
        }
        let mut found = Vec::new();
        grid.candidates(&query, |e| {
            assert_eq!(e.pos, points[e.id as usize]);
            if query.contains(e.pos) {
                found.push(e.id);
            }
        });
        found.sort_unstable();
        let oracle: Vec<u32> = (0..points.len() as u32).filter(|&i| query.contains(points[i as usize])).collect();
        prop_assert_eq!(found, oracle);
    }

    #[test]
    fn grid_moves_keep_every_entry_exactly_once(
        start in prop::collection::vec(point(), 1..200),
        moves in prop::collection::vec((0usize..200, point()), 0..400),
    ) {
        let area = Rect::from_corners(Point::new(0.0, 0.0), Point::new(1000.0, 1000.0));
        let mut grid = Grid::new(area, 50.0);
        let mut pos = start.clone();
        let mut cell: Vec<u32> = Vec::new();
        let mut slot: Vec<u32> = Vec::new();
        for (i, p) in start.iter().enumerate() {
            let (c, s) = grid.insert(Entry { id: i as u32, owner: 0, pos: *p });
            cell.push(c);
            slot.push(s);
        }
        for (who, to) in moves {
            let i = who % start.len();
            let c = grid.cell_of(to);
            if c == cell[i] {
                grid.update(c, slot[i], to);
            } else {
                if let Some(moved) = grid.remove(cell[i], slot[i]) {
                    slot[moved as usize] = slot[i];
                }
                (cell[i], slot[i]) = grid.insert(Entry { id: i as u32, owner: 0, pos: to });
            }
            pos[i] = to;
        }
        prop_assert_eq!(grid.len(), start.len());
        let everything = Rect::from_corners(Point::new(-100.0, -100.0), Point::new(1100.0, 1100.0));
        let mut seen = Vec::new();
        grid.candidates(&everything, |e| {
            assert_eq!(e.pos, pos[e.id as usize]);
            seen.push(e.id);
        });
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..start.len() as u32).collect::<Vec<_>>());
        // And each is found in the cell of where it is now.
        for (i, p) in pos.iter().enumerate() {
            let at = Rect::from_corners(*p, *p);
            let mut here = false;
            grid.candidates(&at, |e| here |= e.id == i as u32);
            prop_assert!(here);
        }
    }

    /// Built at once or claimed one by one afterwards, towers inside the area or outside it
    /// (in its border cells), at any cell size.
    #[test]
    fn tower_index_matches_a_scan(
        points in prop::collection::vec(point(), 0..300),
        built in 0usize..300,
        cell in 10.0f32..400.0,
        query in rect(),
        centre in point(),
        radius in 0.0f32..500.0,
    ) {
        let area = Rect::from_corners(Point::new(0.0, 0.0), Point::new(1000.0, 1000.0));
        let built = built.min(points.len());
        let mut index = TowerIndex::build(
            area,
            cell,
            points[..built].iter().enumerate().map(|(i, p)| (*p, i as u32)),
        );
        for (i, p) in points.iter().enumerate().skip(built) {
            index.insert(*p, i as u32);
        }
        prop_assert_eq!(index.len(), points.len());
        let mut in_box = Vec::new();
        index.in_rect(&query, |t| in_box.push(t));
        in_box.sort_unstable();
        let oracle: Vec<u32> = (0..points.len() as u32).filter(|&i| query.contains(points[i as usize])).collect();
        prop_assert_eq!(in_box, oracle);
        let mut near = Vec::new();
        index.within(centre, radius, |t| near.push(t));
        near.sort_unstable();
        let oracle: Vec<u32> = (0..points.len() as u32)
            .filter(|&i| points[i as usize].distance2(centre) <= radius * radius)
            .collect();
        prop_assert_eq!(near, oracle);
    }
}
