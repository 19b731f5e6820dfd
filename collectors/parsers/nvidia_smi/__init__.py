"""Parsers for ``nvidia-smi`` outputs, one module per format: ``table`` (the default table),
``full`` (``-q`` and ``-q -d``), ``query_csv`` (the CSV queries); ``values`` is what they share.

All of them produce :class:`~gpu_triage.model.facts.GpuFacts` / :class:`GpuProcess`. They
report values as printed and never judge them: an idle GPU shows ``Idle: Active``,
``SW Power Cap: Active`` or a low PCIe generation while it saves power, and that is
for rules to weigh, not for the parser.

Values nvidia-smi could not read (``N/A``, ``[Not Supported]``, ``Unknown Error``,
``ERR!``, ``GPU is lost``) become ``None`` with the reason in ``unavailable``.
"""
