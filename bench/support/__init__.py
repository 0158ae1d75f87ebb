"""What the benchmarks and the tests both generate: broken and valid documents (``docgen``),
misbehaving model servers (``fault_server``), prompt-injection cases, short sources for a
generator (``hits``) and CLI runs measured in a child process (``reliability_support``)."""
