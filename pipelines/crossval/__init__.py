"""Metric cross-validation against the reference libraries (sacrebleu, rouge-score, nltk,
bert-score, sentence-transformers, the SQuAD script's rules) and the ROUGE-1.5.5 Perl
script's known answers. Test tooling, outside the runtime packages (issue 19);
``facetlake crossval`` is a thin command over :mod:`pipelines.crossval.run`."""
