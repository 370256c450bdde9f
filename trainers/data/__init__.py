"""The data side of torch jobs: token batches, collation, decode inputs (a split or raw
text). May import transforms; nothing else of trainers."""
