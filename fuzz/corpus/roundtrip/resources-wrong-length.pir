def @f() {
  resource<(4,), f32>(r0)
}

resources {
  r0 = "0000803f";
}
