"""The minimap: an overview of the whole capture with the visible range, draggable."""
