"""Reports and charts of a comparison: JSON, Markdown, CSV, text, one HTML page, and the plotly figures."""
