"""The Dex binding: Steps, persistence, RPCs, codecs and the composition root."""
