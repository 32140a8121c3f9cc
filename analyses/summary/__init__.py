"""The summary layer: figures from saved results, the claim table and the report page."""
