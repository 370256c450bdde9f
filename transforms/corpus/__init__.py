"""The corpora users bring, as downloaded, read into chunks of raw records: WMT's SGML
sets, tables (Parquet, JSON Lines, Arrow, TMX), and which of their fields hold the two
languages. May import the rest of formats, text and storage; no Beam."""
