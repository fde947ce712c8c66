pub struct CrossEncoder;
