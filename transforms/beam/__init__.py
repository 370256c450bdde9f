"""The Beam layer: thin DoFns and CombineFns around the pure functions of the other rooms.
May import every room of transforms; the only part of transforms that imports Beam."""
