"""Problems, vocabularies, data generation and the input pipeline."""
