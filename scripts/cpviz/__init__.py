"""cpviz: what cudapool view and cudapool export share (scripts/cudapool-view,
scripts/cudapool-export). Reads a trace or a snapshot into one Recording
(recording.py), and writes it out as a self-contained HTML page (page.py),
PyTorch's memory_viz pickle (memviz.py) or a Chrome/Perfetto counter trace
(perfetto.py). Pure standard library: nothing to install."""
