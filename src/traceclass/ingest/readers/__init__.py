"""The readers, one module each: ``NAME``, ``DESCRIPTION``, ``sniff(probe) -> bool`` and
``read(probe) -> Trace``. :data:`traceclass.ingest.READERS` lists them in sniffing order."""
