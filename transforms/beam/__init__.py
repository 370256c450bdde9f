"""The Beam layer: DoFns and CombineFns around the other rooms' pure functions, and each step's
composite PTransforms. May import every room of transforms; the only part importing Beam."""
