"""Model providers behind one small streaming port."""
